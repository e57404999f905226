// Every cap on what the SDK reads from the network, in one place (README: Limits; the C# SDK's Limits.cs, the
// same values). A hostile or broken server must not make a game buffer an unbounded body, parse a number in
// superlinear time, or hold a frame: each body is read no further than one byte past its cap.
#pragma once

#include <cstddef>
#include <string>

namespace npcmind {

/// The SDK's caps on what it reads (bytes, lines).
struct Limits {
    /// An answer of the decision API (decide, manifest, health, session, telemetry, report).
    static constexpr size_t MaxAnswerBytes = 1024 * 1024;
    /// An error body (4xx, 5xx): what is read of it to say what it was.
    static constexpr size_t MaxErrorBytes = 64 * 1024;
    /// One streamed decide answer in all.
    static constexpr size_t MaxStreamBytes = 1024 * 1024;
    /// Lines of one streamed decide answer: 16 decisions and the last line, four times over.
    static constexpr int MaxStreamLines = 4 * 16 + 1;
    /// One answer of the dialogue loop (POST /npcs/{id}/process: the tape comes back whole).
    static constexpr size_t MaxStepBytes = 4 * 1024 * 1024;
    /// GET /v1/keys: a few public keys.
    static constexpr size_t MaxKeysBytes = 64 * 1024;
    /// The answer of an OpenAI-compatible cortex.
    static constexpr size_t MaxCortexBytes = 8 * 1024 * 1024;
    /// A distilled policy (GET /v1/policy).
    static constexpr size_t MaxPolicyBytes = 16 * 1024 * 1024;

    /// The cap that applies to a body of this status: the call's own, or the error cap below it.
    static size_t For(int status, size_t maxBytes) {
        return status >= 400 && MaxErrorBytes < maxBytes ? MaxErrorBytes : maxBytes;
    }
    /// What is said of a body past its cap: where, the cap in bytes, and its name.
    static std::string TooLarge(const std::string& where, size_t cap, const std::string& name) {
        return where + ": the body is larger than " + Bytes(cap) + " bytes (" + name + "), not read past that";
    }
    /// A count with thousands separators (as every message of the SDK writes a cap).
    static std::string Bytes(size_t n) {
        std::string digits = std::to_string(n), out;
        for (size_t i = 0; i < digits.size(); i++) {
            if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
            out.push_back(digits[i]);
        }
        return out;
    }
};

}  // namespace npcmind
