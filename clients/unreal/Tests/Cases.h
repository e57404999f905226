// Where the shared test data lives, and comparing by the conformance format's subset rule (the C# SDK's
// Tests/Cases.cs).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "NpcMindCore/Json.h"

namespace cases {

/// The repository's root: NPCMIND_REPO (set by CMake), or the environment's of that name.
inline std::string Repo() {
    const char* given = std::getenv("NPCMIND_REPO");
    return given && *given ? given : NPCMIND_REPO;
}

inline std::string ReadText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline npcmind::Value Read(const std::string& path) {
    npcmind::Parsed p = npcmind::Json::Parse(ReadText(path));
    return p.value;
}

/// `expected` as a subset of `actual`, by the README's rules; where it differs, or "".
inline std::string Differs(const npcmind::Value& expected, const npcmind::Value& actual, const std::string& at) {
    using npcmind::Json;
    auto differ = [&]() { return at + ": expected " + Json::Show(expected) + ", got " + Json::Show(actual); };
    if (expected.IsNull()) return actual.IsNull() ? "" : at + ": expected null, got " + Json::Show(actual);
    if (expected.IsArray()) {
        if (!actual.IsArray() || actual.Size() != expected.Size()) return differ();
        for (size_t i = 0; i < expected.Size(); i++) {
            std::string d = Differs(expected.Items()[i], actual.Items()[i], at + "[" + std::to_string(i) + "]");
            if (!d.empty()) return d;
        }
        return "";
    }
    if (expected.IsObject()) {
        if (!actual.IsObject()) return at + ": expected an object, got " + Json::Show(actual);
        for (const auto& m : expected.Members()) {
            std::string d = Differs(m.value, actual[m.key], at + "." + m.key);
            if (!d.empty()) return d;
        }
        return "";
    }
    if (expected.IsNumber() && actual.IsNumber()) return expected.AsNumber() == actual.AsNumber() ? "" : differ();
    if (expected.GetType() != actual.GetType()) return differ();
    if (expected.IsString()) return expected.AsString() == actual.AsString() ? "" : differ();
    return expected.AsBool() == actual.AsBool() ? "" : differ();
}

}  // namespace cases
