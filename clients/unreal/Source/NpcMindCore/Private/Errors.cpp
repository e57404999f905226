// Error answers, read the one way.
#include "NpcMindCore/Errors.h"

namespace npcmind {

std::string Errors::Text(const Value& v) {
    switch (v.GetType()) {
        case Value::Type::Null: return "";
        case Value::Type::String: return v.AsString();
        case Value::Type::Bool: return v.AsBool() ? "true" : "false";
        case Value::Type::Number: return Json::Show(v);
        default: return Json::Show(v);
    }
}

ErrorAnswer Errors::ReadError(const Value& body) {
    const Value& err = body["error"];
    ErrorAnswer e;
    for (const auto& d : err["details"].Items())
        if (d.IsObject()) e.Details.push_back(Problem{Text(d["path"]), Text(d["message"])});
    e.Code = Text(err["code"]);
    e.Message = Text(err["message"]);
    return e;
}

std::string Errors::ErrorLine(const Value& body, const std::string& otherwise) {
    ErrorAnswer e = ReadError(body);
    std::string problems;
    for (const auto& d : e.Details) problems += (problems.empty() ? "" : "; ") + d.Path + ": " + d.Message;
    if (!problems.empty()) return problems;
    return !e.Message.empty() ? e.Message : otherwise;
}

std::string Errors::Unnumbered(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        if (s[i] < '0' || s[i] > '9') {
            out.push_back(s[i++]);
            continue;
        }
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
        if (i + 1 < s.size() && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
            i++;
            while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++;
        }
        out.push_back('#');
    }
    return out;
}

}  // namespace npcmind
