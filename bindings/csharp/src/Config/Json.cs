// A small JSON reader (no NuGet on Mono): the binding reads the core's default configuration with
// it (CoreDefaults), and the conformance runner its cases. Values keep their source span, so a
// case's `config` object is handed to the library as the text it was written as, and a number
// can be read again exactly (a 64-bit seed).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Holdoff
{
    internal enum JsonKind { Null, Bool, Number, String, Array, Object }

    internal sealed class JsonNode
    {
        public JsonKind Kind;
        public bool Bool;
        public double Number;
        public string String;
        public List<JsonNode> Items;
        public List<KeyValuePair<string, JsonNode>> Fields;
        internal string Source;
        internal int Start, End;

        public string Raw { get { return Source.Substring(Start, End - Start); } }

        public JsonNode Get(string key)
        {
            if (Kind != JsonKind.Object) return null;
            foreach (var f in Fields) if (f.Key == key) return f.Value;
            return null;
        }

        public string Str(string key, string dflt)
        {
            var v = Get(key);
            return v != null && v.Kind == JsonKind.String ? v.String : dflt;
        }

        public bool True(string key)
        {
            var v = Get(key);
            return v != null && v.Kind == JsonKind.Bool && v.Bool;
        }

        /// <summary>A non-negative integer member, or null.</summary>
        public ulong? U64(string key)
        {
            var v = Get(key);
            if (v == null || v.Kind != JsonKind.Number || v.Number < 0 || v.Number != Math.Floor(v.Number)) return null;
            return (ulong)v.Number;
        }

        /// <summary>An integer member (any sign), or null.</summary>
        public long? I64(string key)
        {
            var v = Get(key);
            if (v == null || v.Kind != JsonKind.Number || v.Number != Math.Floor(v.Number) || Math.Abs(v.Number) > 9007199254740992.0)
                return null;
            return (long)v.Number;
        }

        public override string ToString() { return Raw; }
    }

    internal static class Json
    {
        public static JsonNode Parse(string text)
        {
            int i = 0;
            var v = Value(text, ref i);
            Ws(text, ref i);
            if (i != text.Length) throw new FormatException("trailing text at " + i);
            return v;
        }

        static void Ws(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        static JsonNode Value(string s, ref int i)
        {
            Ws(s, ref i);
            if (i >= s.Length) throw new FormatException("unexpected end");
            var n = new JsonNode { Source = s, Start = i };
            char c = s[i];
            if (c == '{')
            {
                n.Kind = JsonKind.Object;
                n.Fields = new List<KeyValuePair<string, JsonNode>>();
                i++;
                Ws(s, ref i);
                if (s[i] == '}') i++;
                else
                    while (true)
                    {
                        Ws(s, ref i);
                        string key = Str(s, ref i);
                        Ws(s, ref i);
                        Expect(s, ref i, ':');
                        n.Fields.Add(new KeyValuePair<string, JsonNode>(key, Value(s, ref i)));
                        Ws(s, ref i);
                        if (s[i] == ',') { i++; continue; }
                        Expect(s, ref i, '}');
                        break;
                    }
            }
            else if (c == '[')
            {
                n.Kind = JsonKind.Array;
                n.Items = new List<JsonNode>();
                i++;
                Ws(s, ref i);
                if (s[i] == ']') i++;
                else
                    while (true)
                    {
                        n.Items.Add(Value(s, ref i));
                        Ws(s, ref i);
                        if (s[i] == ',') { i++; continue; }
                        Expect(s, ref i, ']');
                        break;
                    }
            }
            else if (c == '"')
            {
                n.Kind = JsonKind.String;
                n.String = Str(s, ref i);
            }
            else if (Lit(s, ref i, "true")) { n.Kind = JsonKind.Bool; n.Bool = true; }
            else if (Lit(s, ref i, "false")) { n.Kind = JsonKind.Bool; }
            else if (Lit(s, ref i, "null")) { n.Kind = JsonKind.Null; }
            else
            {
                int start = i;
                while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
                if (start == i) throw new FormatException("unexpected '" + c + "' at " + i);
                n.Kind = JsonKind.Number;
                n.Number = double.Parse(s.Substring(start, i - start), NumberStyles.Float, CultureInfo.InvariantCulture);
            }
            n.End = i;
            return n;
        }

        static bool Lit(string s, ref int i, string lit)
        {
            if (string.CompareOrdinal(s, i, lit, 0, lit.Length) != 0) return false;
            i += lit.Length;
            return true;
        }

        static void Expect(string s, ref int i, char c)
        {
            if (i >= s.Length || s[i] != c) throw new FormatException("expected '" + c + "' at " + i);
            i++;
        }

        static string Str(string s, ref int i)
        {
            Expect(s, ref i, '"');
            var sb = new StringBuilder();
            while (s[i] != '"')
            {
                char c = s[i++];
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[i++];
                switch (e)
                {
                    case 'n': sb.Append('\n'); break;
                    case 't': sb.Append('\t'); break;
                    case 'r': sb.Append('\r'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'u':
                        sb.Append((char)int.Parse(s.Substring(i, 4), NumberStyles.HexNumber));
                        i += 4;
                        break;
                    default: sb.Append(e); break;
                }
            }
            i++;
            return sb.ToString();
        }
    }
}
