// Reading the service's error answers: one reader for every failure the SDK meets.
#pragma once

#include <string>
#include <vector>

#include "NpcMindCore/Json.h"

namespace npcmind {

/// One problem of a 422, by path.
struct Problem {
    std::string Path;
    std::string Message;
};

/// An error answer as its code, message and problems.
struct ErrorAnswer {
    std::string Code;
    std::string Message;
    std::vector<Problem> Details;
};

struct Errors {
    /// An error answer; empty parts for a body that is none (a proxy's page).
    static ErrorAnswer ReadError(const Value& body);
    /// An error answer in one line: its problems by path, else its message, else `otherwise`.
    static std::string ErrorLine(const Value& body, const std::string& otherwise);
    /// A value as JavaScript's String() makes of it; null is empty here.
    static std::string Text(const Value& v);
    /// The figures in a text (seconds left, sizes) as `#`: a countdown is not a new kind of message.
    static std::string Unnumbered(const std::string& s);
};

}  // namespace npcmind
