// Reading the service's error answers: one reader for every failure the SDK meets.

using System.Collections.Generic;
using System.Globalization;
using System.Linq;

namespace NpcMind
{
    /// <summary>One problem of a 422, by path.</summary>
    internal sealed class Problem
    {
        public readonly string Path;
        public readonly string Message;

        public Problem(string path, string message)
        {
            Path = path;
            Message = message;
        }
    }

    /// <summary>An error answer as its code, message and problems.</summary>
    internal sealed class ErrorAnswer
    {
        public readonly string Code;
        public readonly string Message;
        public readonly List<Problem> Details;

        public ErrorAnswer(string code, string message, List<Problem> details)
        {
            Code = code;
            Message = message;
            Details = details;
        }
    }

    internal static class Errors
    {
        /// <summary>An error answer; empty parts for a body that is none (a proxy's page).</summary>
        public static ErrorAnswer ReadError(object body)
        {
            var err = Json.Get(body, "error") as IDictionary<string, object> ?? new Dictionary<string, object>();
            var details = new List<Problem>();
            var found = Json.Get(err, "details") as IList<object>;
            if (found != null)
                foreach (var d in found)
                    if (d is IDictionary<string, object>)
                        details.Add(new Problem(Text(Json.Get(d, "path")), Text(Json.Get(d, "message"))));
            return new ErrorAnswer(Text(Json.Get(err, "code")), Text(Json.Get(err, "message")), details);
        }

        /// <summary>An error answer in one line: its problems by path, else its message, else
        /// <paramref name="otherwise"/>.</summary>
        public static string ErrorLine(object body, string otherwise)
        {
            var e = ReadError(body);
            string problems = string.Join("; ", e.Details.Select(d => d.Path + ": " + d.Message).ToArray());
            if (problems != "") return problems;
            return e.Message != "" ? e.Message : otherwise;
        }

        /// <summary>The ServiceException of an error answer: its status, the code of its body, its problems in one
        /// line after <paramref name="what"/> (the request: <c>POST /npcs/mara/process</c>).</summary>
        public static ServiceException Refused(int status, object body, string what)
        {
            return new ServiceException(what + " answered " + status + ": " + ErrorLine(body, ""), status, ReadError(body).Code);
        }

        /// <summary>Whether a value is a JSON object.</summary>
        public static bool IsObject(object value)
        {
            return value is IDictionary<string, object>;
        }

        /// <summary>A value as the text JavaScript's String() makes of it; null and absent are empty here (the
        /// TypeScript SDK's <c>String(x ?? "")</c>).</summary>
        internal static string Text(object v)
        {
            if (v == null) return "";
            if (v is string) return (string)v;
            if (v is bool) return (bool)v ? "true" : "false";
            if (Json.IsNumber(v)) return Num(Json.ToDouble(v));
            try { return Json.Write(v); } catch (NpcJsonException) { return v.ToString(); }
        }

        /// <summary>A number as JavaScript writes it for the common cases (an integer without ".0").</summary>
        internal static string Num(double d)
        {
            if (d == System.Math.Floor(d) && System.Math.Abs(d) < 1e15) return ((long)d).ToString(CultureInfo.InvariantCulture);
            return d.ToString("R", CultureInfo.InvariantCulture);
        }

        /// <summary>A string as JSON writes it (for messages that quote a game's id).</summary>
        internal static string Quote(string s)
        {
            return Json.Write(s);
        }
    }
}
