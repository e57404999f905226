// The C# SDK's public surface, as tests/test_surface.py compares it with surface.json: every public type of the
// assemblies given (NpcMind.Runtime.dll, NpcMind.Unity.dll), its kind, and its public members declared by it
// (methods, properties, fields, events, an enum's values; constructors, accessors and object's overrides left
// out), read by reflection from the built DLLs. Usage: mono ReadCsharp.exe <dll>... -> JSON on stdout.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Text;

public static class ReadCsharp
{
    static readonly HashSet<string> ObjectMethods = new HashSet<string> { "ToString", "Equals", "GetHashCode", "Finalize" };

    public static int Main(string[] args)
    {
        var types = new SortedDictionary<string, KeyValuePair<string, SortedSet<string>>>(StringComparer.Ordinal);
        foreach (string path in args)
        {
            Assembly assembly = Assembly.LoadFrom(path);
            foreach (Type type in assembly.GetExportedTypes())
                types[NameOf(type)] = new KeyValuePair<string, SortedSet<string>>(KindOf(type), MembersOf(type));
        }
        var json = new StringBuilder("{");
        bool first = true;
        foreach (var entry in types)
        {
            json.Append(first ? "\n" : ",\n");
            first = false;
            json.Append(" ").Append(Quote(entry.Key)).Append(": {\"kind\": ").Append(Quote(entry.Value.Key));
            json.Append(", \"members\": [").Append(string.Join(", ", entry.Value.Value.Select(Quote))).Append("]}");
        }
        Console.WriteLine(json.Append("\n}").ToString());
        return 0;
    }

    /// <summary>A nested type is named Outer.Inner; the namespace is left out (NpcMind, NpcMind.Unity).</summary>
    static string NameOf(Type type)
    {
        string name = type.Name;
        int tick = name.IndexOf('`');
        if (tick >= 0) name = name.Substring(0, tick);
        return type.DeclaringType == null ? name : NameOf(type.DeclaringType) + "." + name;
    }

    static string KindOf(Type type)
    {
        if (type.IsEnum) return "enum";
        if (type.IsInterface) return "interface";
        if (typeof(Delegate).IsAssignableFrom(type)) return "delegate";
        if (type.IsValueType) return "struct";
        if (type.IsAbstract && type.IsSealed) return "static class";
        return "class";
    }

    static SortedSet<string> MembersOf(Type type)
    {
        var names = new SortedSet<string>(StringComparer.Ordinal);
        if (typeof(Delegate).IsAssignableFrom(type)) return names;
        if (type.IsEnum)
        {
            foreach (string name in Enum.GetNames(type)) names.Add(name);
            return names;
        }
        const BindingFlags flags = BindingFlags.Public | BindingFlags.Instance | BindingFlags.Static | BindingFlags.DeclaredOnly;
        var members = new List<MemberInfo>();  // its own and those of its bases in the package (an error's Status,
        for (Type t = type; t != null && t.Assembly == type.Assembly; t = t.BaseType)  // as Python's reader reads)
            members.AddRange(t.GetMembers(flags));
        foreach (MemberInfo member in members)
        {
            switch (member.MemberType)
            {
                case MemberTypes.Method:
                    var method = (MethodInfo)member;
                    if (method.IsSpecialName || ObjectMethods.Contains(method.Name)) continue;
                    break;
                case MemberTypes.Property:
                case MemberTypes.Field:
                case MemberTypes.Event:
                    break;
                default:
                    continue;  // constructors; nested types are types of their own
            }
            int dot = member.Name.LastIndexOf('.');  // an explicit interface implementation is not public
            if (dot < 0) names.Add(member.Name);
        }
        return names;
    }

    static string Quote(string s)
    {
        return "\"" + s.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\"";
    }
}
