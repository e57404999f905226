// RFC 8785 (JCS) canonical JSON, so the SDK rebuilds the exact bytes an outcome's signature covers (and the
// SHA-256 tape digest inside them): the same rules as the other SDKs' jcs, checked against
// docs/signature-vectors.json.
#pragma once

#include <string>

#include "NpcMindCore/Json.h"

namespace npcmind {

/// A value with no canonical form (a number no double holds), and where it lies (`npcState.gold`, `[0]`).
struct NotCanonical {
    std::string path;
    std::string problem;
    /// The path and the problem, as the other SDKs say it.
    std::string Message() const { return (path.empty() ? "value" : path) + ": " + problem; }
};

/// Canonical JSON: keys sorted by UTF-16 code units, no whitespace, numbers as ECMAScript writes them.
struct Jcs {
    /// The canonical text (UTF-8) of a value; false with `error` set when it has none.
    static bool Canonical(const Value& v, std::string& out, NotCanonical* error = nullptr);
    /// SHA-256 hex (lowercase) of a value's canonical JSON: the tape digest inside a signed outcome.
    static bool Digest(const Value& v, std::string& out, NotCanonical* error = nullptr);
    /// The SHA-256 hex of bytes (OpenSSL's, never one written here).
    static std::string Sha256Hex(const std::string& bytes);
};

}  // namespace npcmind
