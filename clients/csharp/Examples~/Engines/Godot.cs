// A stand-in of the few Godot 4 (.NET) types the README's node example touches, so that build.sh compiles the
// example here (there is no Godot on this machine) and it cannot rot. Not Godot: only the shapes it uses.
namespace Godot
{
    public sealed class StringName
    {
        private readonly string value;
        public StringName(string value) { this.value = value; }
        public static implicit operator string(StringName from) { return from.value; }
        public static implicit operator StringName(string from) { return new StringName(from); }
    }

    [System.AttributeUsage(System.AttributeTargets.Field | System.AttributeTargets.Property)]
    public sealed class ExportAttribute : System.Attribute { }

    public class GodotObject { }

    public partial class Node : GodotObject
    {
        public StringName Name = new StringName("");
        public virtual void _Ready() { }
        public virtual void _Process(double delta) { }
        public virtual void _ExitTree() { }
    }

    public partial class CanvasItem : Node { }

    public partial class Node2D : CanvasItem
    {
        public Vector2 Position { get; set; }
    }

    public struct Vector2
    {
        public float X, Y;
        public Vector2(float x, float y) { X = x; Y = y; }
        public static Vector2 Left { get { return new Vector2(-1, 0); } }
        public static Vector2 Right { get { return new Vector2(1, 0); } }
        public static Vector2 operator +(Vector2 a, Vector2 b) { return new Vector2(a.X + b.X, a.Y + b.Y); }
        public static Vector2 operator *(Vector2 a, float d) { return new Vector2(a.X * d, a.Y * d); }
    }

    public static class Engine
    {
        public static ulong GetProcessFrames() { return 0; }
    }
}
