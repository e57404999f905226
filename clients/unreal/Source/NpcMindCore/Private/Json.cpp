// JSON through RapidJSON's SAX reader (header-only, no exceptions, errors as values): numbers come as their
// literal (kParseNumbersAsStringsFlag) and are read here in linear time; UTF-8 is validated; the reader is
// iterative, so nesting costs no stack, and the handler stops it past Json::MaxDepth.
#include "NpcMindCore/Json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

#define RAPIDJSON_HAS_STDSTRING 1
#include "rapidjson/error/en.h"
#include "rapidjson/reader.h"

namespace npcmind {

namespace {
const std::string kEmpty;
const Array kNoItems;
const Object kNoMembers;
const Value kNull;
}  // namespace

Value Value::MakeArray() {
    Value v;
    v.type_ = Type::Array;
    v.array_ = std::make_shared<Array>();
    return v;
}

Value Value::MakeObject() {
    Value v;
    v.type_ = Type::Object;
    v.object_ = std::make_shared<Object>();
    return v;
}

Value Value::Strings(const std::vector<std::string>& items) {
    Value v = MakeArray();
    v.array_->reserve(items.size());
    for (const auto& s : items) v.array_->emplace_back(s);
    return v;
}

Value Value::Numbers(const std::vector<double>& items) {
    Value v = MakeArray();
    for (double d : items) v.array_->emplace_back(d);
    return v;
}

Value Value::Number(double d, bool integer) {
    Value v(d);
    v.integer_ = integer;
    return v;
}

const std::string& Value::AsString() const { return type_ == Type::String ? *string_ : kEmpty; }
const Array& Value::Items() const { return type_ == Type::Array ? *array_ : kNoItems; }
Array& Value::Items() {
    static Array scratch;
    scratch.clear();
    return type_ == Type::Array ? *array_ : scratch;
}
const Object& Value::Members() const { return type_ == Type::Object ? *object_ : kNoMembers; }
Object& Value::Members() {
    static Object scratch;
    scratch.clear();
    return type_ == Type::Object ? *object_ : scratch;
}

const Value* Value::Get(std::string_view key) const {
    if (type_ != Type::Object) return nullptr;
    for (const auto& m : *object_)
        if (m.key == key) return &m.value;
    return nullptr;
}

const Value& Value::operator[](std::string_view key) const {
    const Value* v = Get(key);
    return v ? *v : kNull;
}

Value& Value::Set(std::string_view key, Value v) {
    if (type_ != Type::Object) *this = MakeObject();
    for (auto& m : *object_)
        if (m.key == key) {
            m.value = std::move(v);
            return m.value;
        }
    object_->push_back(Member{std::string(key), std::move(v)});
    return object_->back().value;
}

bool Value::Remove(std::string_view key) {
    if (type_ != Type::Object) return false;
    for (auto it = object_->begin(); it != object_->end(); ++it)
        if (it->key == key) {
            object_->erase(it);
            return true;
        }
    return false;
}

void Value::Push(Value v) {
    if (type_ != Type::Array) *this = MakeArray();
    array_->push_back(std::move(v));
}

size_t Value::Size() const {
    if (type_ == Type::Array) return array_->size();
    if (type_ == Type::Object) return object_->size();
    return 0;
}

Value Value::ShallowCopy() const {
    Value v = *this;
    if (type_ == Type::Array) v.array_ = std::make_shared<Array>(*array_);
    if (type_ == Type::Object) v.object_ = std::make_shared<Object>(*object_);
    return v;
}

bool Value::Same(const Value& o) const {
    if (type_ != o.type_) return false;
    switch (type_) {
        case Type::Null: return true;
        case Type::Bool: return bool_ == o.bool_;
        case Type::Number: return number_ == o.number_;
        case Type::String: return *string_ == *o.string_;
        case Type::Array: return array_ == o.array_;
        case Type::Object: return object_ == o.object_;
    }
    return false;
}

// --- reading -------------------------------------------------------------------------------------------------

namespace {

/// Builds Values from RapidJSON's events; a key given twice keeps its first place and its last value (as the
/// other SDKs' readers), found in one pass of a hash map at the object's end.
struct Builder : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Builder> {
    std::vector<Value> stack;
    std::vector<std::string> keys;
    Value root;
    std::string error;
    /// Literals RapidJSON refuses as too big, put back: the end of the "0" that stands for each -> the literal.
    const std::unordered_map<size_t, std::string_view>* big = nullptr;
    const rapidjson::MemoryStream* stream = nullptr;

    bool Add(Value v) {
        if (stack.empty()) {
            root = std::move(v);
            return true;
        }
        Value& top = stack.back();
        if (top.IsArray()) top.Items().push_back(std::move(v));
        else {
            top.Members().push_back(Member{std::move(keys.back()), std::move(v)});
            keys.pop_back();
        }
        return true;
    }
    bool Open(Value v) {
        if (stack.size() >= static_cast<size_t>(Json::MaxDepth)) {
            error = "nested deeper than " + std::to_string(Json::MaxDepth) + " levels";
            return false;
        }
        stack.push_back(std::move(v));
        return true;
    }
    bool Close() {
        Value v = std::move(stack.back());
        stack.pop_back();
        if (v.IsObject() && v.Size() > 1) Dedupe(v.Members());
        return Add(std::move(v));
    }
    static void Dedupe(Object& members) {
        std::unordered_map<std::string_view, size_t> first;
        first.reserve(members.size());
        bool twice = false;
        for (size_t i = 0; i < members.size(); i++) {
            auto got = first.emplace(members[i].key, i);
            if (!got.second) twice = true;
        }
        if (!twice) return;
        Object kept;
        std::unordered_map<std::string, size_t> at;
        for (auto& m : members) {
            auto found = at.find(m.key);
            if (found != at.end()) kept[found->second].value = std::move(m.value);
            else {
                at.emplace(m.key, kept.size());
                kept.push_back(std::move(m));
            }
        }
        members = std::move(kept);
    }

    bool Null() { return Add(Value()); }
    bool Bool(bool b) { return Add(Value(b)); }
    bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
        double d = 0;
        bool integer = false;
        std::string_view literal(s, n);
        if (big) {
            auto found = big->find(stream->Tell());
            if (found != big->end()) literal = found->second;
        }
        if (!Json::ReadNumber(literal, d, integer)) {
            error = "not a number";
            return false;
        }
        return Add(Value::Number(d, integer));
    }
    bool String(const char* s, rapidjson::SizeType n, bool) { return Add(Value(std::string(s, n))); }
    bool StartObject() { return Open(Value::MakeObject()); }
    bool Key(const char* s, rapidjson::SizeType n, bool) {
        keys.emplace_back(s, n);
        return true;
    }
    bool EndObject(rapidjson::SizeType) { return Close(); }
    bool StartArray() { return Open(Value::MakeArray()); }
    bool EndArray(rapidjson::SizeType) { return Close(); }
};

/// Whether the literal's digits, past the kept ones, hold one that is not 0 (then a 1 stands for them).
void KeepDigits(std::string& digits, long long& exponent, size_t& dropped) {
    // leading zeros of the significand carry nothing
    size_t lead = 0;
    while (lead + 1 < digits.size() && digits[lead] == '0') lead++;
    digits.erase(0, lead);
    if (digits.size() <= Json::KeptDigits) return;
    bool sticky = digits.find_first_not_of('0', Json::KeptDigits) != std::string::npos;
    dropped = digits.size() - Json::KeptDigits;
    digits.resize(Json::KeptDigits);
    exponent += static_cast<long long>(dropped);
    if (sticky) {
        digits.push_back('1');
        exponent -= 1;
    }
}

/// Number literals RapidJSON may refuse as too big (more than 300 integer digits, or an exponent past 300), in
/// one pass: each is put in `copy` as a "0" and spaces, and kept by the end of that "0" for the handler, which
/// reads the literal itself (past the float range: ±Infinity, as JavaScript reads it; JCS then refuses it).
void Unbig(std::string_view text, std::string& copy, std::unordered_map<size_t, std::string_view>& big) {
    copy.assign(text.data(), text.size());
    bool inString = false;
    for (size_t i = 0; i < text.size(); i++) {
        char c = text[i];
        if (inString) {
            if (c == '\\') i++;
            else if (c == '"') inString = false;
            continue;
        }
        if (c == '"') {
            inString = true;
            continue;
        }
        if (c != '-' && (c < '0' || c > '9')) continue;
        size_t start = i, intDigits = 0, expValue = 0;
        if (text[i] == '-') i++;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') i++, intDigits++;
        while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) i++;
        if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
            i++;
            bool negative = i < text.size() && text[i] == '-';
            if (i < text.size() && (text[i] == '+' || text[i] == '-')) i++;
            while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
                if (!negative && expValue < 1000000) expValue = expValue * 10 + static_cast<size_t>(text[i] - '0');
                i++;
            }
        }
        if (intDigits > 300 || expValue > 300) {
            copy[start] = '0';
            for (size_t j = start + 1; j < i; j++) copy[j] = ' ';
            big.emplace(start + 1, text.substr(start, i - start));
        }
        i--;
    }
}

}  // namespace

bool Json::ReadNumber(std::string_view s, double& out, bool& integer) {
    size_t i = 0;
    bool negative = false;
    if (i < s.size() && s[i] == '-') {
        negative = true;
        i++;
    }
    std::string digits;
    long long exponent = 0;  // value = digits × 10^exponent
    size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') digits.push_back(s[i++]);
    if (i == start) return false;
    integer = true;
    if (i < s.size() && s[i] == '.') {
        integer = false;
        i++;
        size_t f = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            if (digits.size() <= KeptDigits * 2) {  // past that, only whether a digit is not 0 matters
                digits.push_back(s[i]);
                exponent--;
            } else if (s[i] != '0' && digits.back() == '0') {
                digits.back() = '1';
            }
            i++;
        }
        if (i == f) return false;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        integer = false;
        i++;
        bool negExp = false;
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) negExp = s[i++] == '-';
        size_t e = i;
        long long x = 0;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
            if (x < 100000000) x = x * 10 + (s[i] - '0');  // saturates far past any double's exponent
            i++;
        }
        if (i == e) return false;
        exponent += negExp ? -x : x;
    }
    if (i != s.size()) return false;
    size_t dropped = 0;
    KeepDigits(digits, exponent, dropped);
    if (integer && (digits.size() > 18)) integer = digits.size() == 19 && digits <= "9223372036854775807";
    // the kept digits and the exponent, as a literal from_chars reads exactly (round to nearest, ties to even)
    if (digits == "0") {
        out = negative ? -0.0 : 0.0;
        return true;
    }
    long long scale = exponent + static_cast<long long>(digits.size());
    if (scale > 400) {
        out = negative ? -HUGE_VAL : HUGE_VAL;
        return true;
    }
    if (scale < -400) {
        out = negative ? -0.0 : 0.0;
        return true;
    }
    std::string text = digits + "e" + std::to_string(exponent);
    double d = 0;
    auto got = std::from_chars(text.data(), text.data() + text.size(), d);
    if (got.ec == std::errc::result_out_of_range) d = scale > 0 ? HUGE_VAL : 0.0;
    else if (got.ec != std::errc()) return false;
    out = negative ? -d : d;
    return true;
}

Parsed Json::Parse(std::string_view text, size_t maxBytes) {
    Parsed p;
    if (maxBytes > 0 && text.size() > maxBytes) {
        p.error = "larger than " + std::to_string(maxBytes) + " bytes";
        return p;
    }
    constexpr unsigned flags = rapidjson::kParseNumbersAsStringsFlag | rapidjson::kParseValidateEncodingFlag |
                               rapidjson::kParseIterativeFlag;
    Builder b;
    rapidjson::Reader reader;
    rapidjson::MemoryStream ms(text.data(), text.size());
    rapidjson::ParseResult r = reader.Parse<flags>(ms, b);
    std::string copy;
    std::unordered_map<size_t, std::string_view> big;
    if (r.Code() == rapidjson::kParseErrorNumberTooBig) {  // read again once, the big literals put back by hand
        Unbig(text, copy, big);
        b = Builder();
        b.big = &big;
        rapidjson::MemoryStream again(copy.data(), copy.size());
        b.stream = &again;
        r = reader.Parse<flags>(again, b);
    }
    if (r.IsError()) {
        std::string why = !b.error.empty() ? b.error : rapidjson::GetParseError_En(r.Code());
        p.error = why + " at byte " + std::to_string(r.Offset());
        return p;
    }
    p.value = std::move(b.root);
    return p;
}

// --- writing -------------------------------------------------------------------------------------------------

std::string Json::EsNumber(double x) {
    if (x == 0) return "0";
    if (x < 0) return "-" + EsNumber(-x);
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string sci(buf, r.ptr);  // d.ddde±XX, the shortest that reads back
    size_t e = sci.find('e');
    std::string digits = sci.substr(0, 1) + (e > 2 ? sci.substr(2, e - 2) : "");
    int n = std::stoi(sci.substr(e + 1)) + 1;  // x = 0.digits × 10^n
    int k = static_cast<int>(digits.size());
    if (k <= n && n <= 21) return digits + std::string(n - k, '0');
    if (0 < n && n <= 21) return digits.substr(0, n) + "." + digits.substr(n);
    if (-6 < n && n <= 0) return "0." + std::string(-n, '0') + digits;
    int ex = n - 1;
    std::string mantissa = k == 1 ? digits : digits.substr(0, 1) + "." + digits.substr(1);
    return mantissa + "e" + (ex >= 0 ? "+" : "-") + std::to_string(ex < 0 ? -ex : ex);
}

namespace {

void WriteString(std::string& out, std::string_view s) {
    out.push_back('"');
    for (unsigned char c : s) {
        switch (c) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\b': out += "\\b"; continue;
            case '\t': out += "\\t"; continue;
            case '\n': out += "\\n"; continue;
            case '\f': out += "\\f"; continue;
            case '\r': out += "\\r"; continue;
            default: break;
        }
        if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            out += "\\u00";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    out.push_back('"');
}

bool WriteValue(const Value& v, std::string& out, std::string* error, int depth) {
    if (depth >= Json::MaxDepth) {
        if (error) *error = "nested deeper than " + std::to_string(Json::MaxDepth) + " levels";
        return false;
    }
    switch (v.GetType()) {
        case Value::Type::Null: out += "null"; return true;
        case Value::Type::Bool: out += v.AsBool() ? "true" : "false"; return true;
        case Value::Type::Number:
            if (!std::isfinite(v.AsNumber())) {
                if (error) *error = std::isnan(v.AsNumber()) ? "NaN is not a JSON number" : "Infinity is not a JSON number";
                return false;
            }
            out += Json::EsNumber(v.AsNumber());
            return true;
        case Value::Type::String: WriteString(out, v.AsString()); return true;
        case Value::Type::Array: {
            out.push_back('[');
            bool first = true;
            for (const auto& item : v.Items()) {
                if (!first) out.push_back(',');
                first = false;
                if (!WriteValue(item, out, error, depth + 1)) return false;
            }
            out.push_back(']');
            return true;
        }
        case Value::Type::Object: {
            out.push_back('{');
            bool first = true;
            for (const auto& m : v.Members()) {
                if (!first) out.push_back(',');
                first = false;
                WriteString(out, m.key);
                out.push_back(':');
                if (!WriteValue(m.value, out, error, depth + 1)) return false;
            }
            out.push_back('}');
            return true;
        }
    }
    return false;
}

}  // namespace

bool Json::Write(const Value& v, std::string& out, std::string* error) {
    std::string text;
    if (!WriteValue(v, text, error, 0)) return false;
    out = std::move(text);
    return true;
}

std::string Json::Show(const Value& v) {
    std::string out;
    return Write(v, out) ? out : "null";
}

std::string Json::Quote(std::string_view s) {
    std::string out;
    WriteString(out, s);
    return out;
}

}  // namespace npcmind
