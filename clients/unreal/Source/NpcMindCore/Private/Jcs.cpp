// Canonical JSON (RFC 8785), and SHA-256 through OpenSSL.
#include "NpcMindCore/Jcs.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>

namespace npcmind {

namespace {

/// A UTF-8 key as UTF-16 code units: RFC 8785 sorts by them (UTF-8's byte order differs above U+FFFF).
std::u16string Utf16(const std::string& s) {
    std::u16string out;
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        uint32_t cp = c;
        size_t n = 1;
        if (c >= 0xF0) cp = c & 0x07, n = 4;
        else if (c >= 0xE0) cp = c & 0x0F, n = 3;
        else if (c >= 0xC0) cp = c & 0x1F, n = 2;
        for (size_t k = 1; k < n && i + k < s.size(); k++) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
        i += n;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
            out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
        } else {
            out.push_back(static_cast<char16_t>(cp));
        }
    }
    return out;
}

bool Write(const Value& v, std::string& out, const std::string& path, int depth, NotCanonical* error) {
    auto fail = [&](const std::string& problem) {
        if (error) *error = NotCanonical{path, problem};
        return false;
    };
    if (depth >= Json::MaxDepth) return fail("nested deeper than " + std::to_string(Json::MaxDepth) + " levels");
    switch (v.GetType()) {
        case Value::Type::Number: {
            double x = v.AsNumber();
            if (std::isnan(x)) return fail("NaN is not a JSON number");
            if (std::isinf(x)) return fail(std::string(x > 0 ? "Infinity" : "-Infinity") + " is not a JSON number");
            out += Json::EsNumber(x);
            return true;
        }
        case Value::Type::Array: {
            out.push_back('[');
            size_t i = 0;
            for (const auto& item : v.Items()) {
                if (i > 0) out.push_back(',');
                if (!Write(item, out, path + "[" + std::to_string(i) + "]", depth + 1, error)) return false;
                i++;
            }
            out.push_back(']');
            return true;
        }
        case Value::Type::Object: {
            const Object& members = v.Members();
            std::vector<std::pair<std::u16string, const Member*>> keys;
            keys.reserve(members.size());
            for (const auto& m : members) keys.emplace_back(Utf16(m.key), &m);
            std::stable_sort(keys.begin(), keys.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
            out.push_back('{');
            for (size_t i = 0; i < keys.size(); i++) {
                if (i > 0) out.push_back(',');
                const Member& m = *keys[i].second;
                out += Json::Quote(m.key);
                out.push_back(':');
                if (!Write(m.value, out, path.empty() ? m.key : path + "." + m.key, depth + 1, error)) return false;
            }
            out.push_back('}');
            return true;
        }
        default: {
            std::string text;
            Json::Write(v, text);
            out += text;
            return true;
        }
    }
}

}  // namespace

bool Jcs::Canonical(const Value& v, std::string& out, NotCanonical* error) {
    std::string text;
    if (!Write(v, text, "", 0, error)) return false;
    out = std::move(text);
    return true;
}

std::string Jcs::Sha256Hex(const std::string& bytes) {
    unsigned char hash[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(bytes.data(), bytes.size(), hash, &n, EVP_sha256(), nullptr);
    static const char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; i++) {
        out.push_back(hex[hash[i] >> 4]);
        out.push_back(hex[hash[i] & 15]);
    }
    return out;
}

bool Jcs::Digest(const Value& v, std::string& out, NotCanonical* error) {
    std::string text;
    if (!Canonical(v, text, error)) return false;
    out = Sha256Hex(text);
    return true;
}

}  // namespace npcmind
