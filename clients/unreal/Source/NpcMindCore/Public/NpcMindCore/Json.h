// The JSON values the protocol carries, read through RapidJSON's SAX reader and written here (the C# SDK's
// Json.cs). Errors are values (no exceptions: Unreal builds without them). Containers have reference semantics,
// as the other SDKs' objects do: copying a Value shares its array or object (a game's observation is kept by
// reference each frame, not copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npcmind {

class Value;
using Array = std::vector<Value>;
struct Member;
using Object = std::vector<Member>;

/// A JSON value: null, bool, number (a double, with whether its literal was an integer), string, array, object.
class Value {
public:
    enum class Type { Null, Bool, Number, String, Array, Object };

    Value() = default;
    Value(std::nullptr_t) {}
    Value(bool b) : type_(Type::Bool), bool_(b) {}
    Value(int n) : type_(Type::Number), number_(n), integer_(true) {}
    Value(int64_t n) : type_(Type::Number), number_(static_cast<double>(n)), integer_(true) {}
    Value(double d) : type_(Type::Number), number_(d) {}
    Value(const char* s) : type_(Type::String), string_(std::make_shared<std::string>(s)) {}
    Value(std::string s) : type_(Type::String), string_(std::make_shared<std::string>(std::move(s))) {}
    Value(std::string_view s) : type_(Type::String), string_(std::make_shared<std::string>(s)) {}

    static Value MakeArray();
    static Value MakeObject();
    static Value Strings(const std::vector<std::string>& items);
    static Value Numbers(const std::vector<double>& items);
    /// A number read from a literal: `integer` when it had no fraction or exponent and fits in 64 bits.
    static Value Number(double d, bool integer);

    Type GetType() const { return type_; }
    bool IsNull() const { return type_ == Type::Null; }
    bool IsBool() const { return type_ == Type::Bool; }
    bool IsNumber() const { return type_ == Type::Number; }
    /// An integer literal (C#'s `long`), as `epoch` and `latency_ms` of a stream's last line must be.
    bool IsInteger() const { return type_ == Type::Number && integer_; }
    bool IsString() const { return type_ == Type::String; }
    bool IsArray() const { return type_ == Type::Array; }
    bool IsObject() const { return type_ == Type::Object; }

    bool AsBool() const { return type_ == Type::Bool && bool_; }
    double AsNumber() const { return type_ == Type::Number ? number_ : 0; }
    /// The string, or "" for any other value.
    const std::string& AsString() const;
    /// The array's items (empty for any other value).
    const Array& Items() const;
    Array& Items();
    /// The object's members in the order read (empty for any other value).
    const Object& Members() const;
    Object& Members();

    /// The member named `key`, or nullptr (also for a value that is not an object).
    const Value* Get(std::string_view key) const;
    /// The member `key`, or a null value.
    const Value& operator[](std::string_view key) const;
    bool Has(std::string_view key) const { return Get(key) != nullptr; }
    /// Set a member (replacing one of that name): the object is shared, as a C# Dictionary is.
    Value& Set(std::string_view key, Value v);
    bool Remove(std::string_view key);
    void Push(Value v);
    size_t Size() const;
    /// A new object or array holding the same members (one level: the members' own containers are shared).
    Value ShallowCopy() const;
    /// Whether two values are the same container (reference equality), or equal scalars.
    bool Same(const Value& other) const;

private:
    Type type_ = Type::Null;
    bool bool_ = false;
    double number_ = 0;
    bool integer_ = false;
    std::shared_ptr<std::string> string_;
    std::shared_ptr<Array> array_;
    std::shared_ptr<Object> object_;
};

struct Member {
    std::string key;
    Value value;
};

/// A value read, or what is wrong with the text (`error` non-empty; `value` null).
struct Parsed {
    Value value;
    std::string error;
    bool Ok() const { return error.empty(); }
};

/// JSON reading and writing with the SDK's caps.
struct Json {
    /// Nesting the reader and writer accept: past it an error, never a stack overflow.
    static constexpr int MaxDepth = 512;
    /// Significant digits kept of a number literal: the rest only say whether one of them is not 0, so the
    /// reading stays the double nearest the literal and its cost linear in the literal's length.
    static constexpr size_t KeptDigits = 800;

    /// The value of a whole JSON text (UTF-8, checked); `maxBytes` (0: none) refuses a longer text unread.
    static Parsed Parse(std::string_view text, size_t maxBytes = 0);
    /// Compact JSON text; false with `error` set for a value JSON cannot carry (NaN, infinity, too deep).
    static bool Write(const Value& v, std::string& out, std::string* error = nullptr);
    /// Compact JSON text, or "null" when it cannot be written (for messages).
    static std::string Show(const Value& v);
    /// The double nearest a JSON number literal, in time linear in its length; false when it is not one.
    static bool ReadNumber(std::string_view literal, double& out, bool& integer);
    /// A double as ECMAScript's Number.prototype.toString writes it (finite values only).
    static std::string EsNumber(double x);
    /// A string as JSON writes it, quoted (for messages that quote a game's id).
    static std::string Quote(std::string_view s);
};

}  // namespace npcmind
