// Reading a /v1/decide answer: checked against the protocol before anything of it reaches the game.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "NpcMindCore/Json.h"

namespace npcmind {

/// One decision of an answer: `AI` (action, label, ttl, ...) or `FALLBACK` (code, reason).
struct Decision {
    std::string Id;
    std::string Source;
    std::string Action;
    std::string Label;
    double TtlMs = 0;
    std::string DecisionId;
    bool Cached = false;
    std::optional<double> Confidence;
    std::string Code;
    std::string Reason;
};

/// A /v1/decide answer that has the protocol's shape.
struct DecideResponse {
    double Epoch = 0;
    std::vector<Decision> Decisions;
};

/// One line of a streamed answer: a decision, the last line (it has `a2g`), or a problem.
struct StreamLine {
    enum class Kind { Decision, End, Problem } Is = Kind::Problem;
    Decision Got;
    double Epoch = 0;
    std::string Problem;
};

struct Answer {
    /// One decision read, or its problem (`problem` set, false returned).
    static bool ReadDecision(const Value& d, const std::string& at, Decision& out, std::string& problem);
    /// One line of a streamed decide answer.
    static StreamLine ReadStreamLine(const std::string& line);
    /// The answer, or what is wrong with it (not npcmind, or another protocol version: never into the game).
    static bool ReadDecideResponse(const Value& body, DecideResponse& out, std::string& problem);
};

}  // namespace npcmind
