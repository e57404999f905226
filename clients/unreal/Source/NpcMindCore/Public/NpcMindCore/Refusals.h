// How the SDK reads a refusal: a 422 whose problems all lie in named entities costs only those entities (each is
// named once and sent alone until the service takes it); any other refusal is said once, with its fix.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "NpcMindCore/Session.h"
#include "NpcMindCore/Types.h"

namespace npcmind {

/// Says a line once per key; `native`: the entities concerned use their native AI.
using Say = std::function<void(const std::string& key, const std::string& message, bool native)>;

/// The entities the service refused (id -> why), and the lines that say a refusal once.
class Refusals {
public:
    /// Entity id -> why the service refused it: sent alone until taken.
    std::unordered_map<std::string, std::string> Alone;

    Refusals(Say say, Stats& stats) : say_(std::move(say)), stats_(stats) {}
    /// The entities of a 422 whose every problem lies in one of the request's entities (`sent`: id and type, in
    /// the request's order), each with why, named once and sent alone from now on; nullopt otherwise.
    std::optional<std::vector<std::pair<std::string, std::string>>> Entities(
        int status, const Value& body, const std::vector<std::pair<std::string, std::string>>& sent);
    /// Say a refusal of the whole request once (a countdown in its text is not a new refusal).
    void Said(int status, const Value& body, bool hosted);
    /// How long a 429 or 5xx asks us to wait (its Retry-After in seconds), in ms; else a second.
    static double RetryAfterMs(const Headers& headers);
    /// The entities of a 422 whose every problem lies in one of the request's entities (ids in the request's
    /// order), each with why, in order; nullopt when a problem lies in the whole request.
    static std::optional<std::vector<std::pair<std::string, std::string>>> RefusedEntities(
        int status, const Value& body, const std::vector<std::string>& sent);

private:
    Say say_;
    Stats& stats_;
};

}  // namespace npcmind
