// Saying a problem once: a game loop would repeat it every frame.
#pragma once

#include <string>
#include <unordered_set>

#include "NpcMindCore/Types.h"

namespace npcmind {

/// Says a line once per key.
class SayOnce {
public:
    explicit SayOnce(Logger log) : log_(std::move(log)) {}
    /// Say `message` unless `key` was said (at most 1,000 kinds, then it starts over); `native`: it leaves
    /// entities to the game's own AI, and it says so.
    void Say(const std::string& key, const std::string& message, bool native = true) {
        if (said_.count(key)) return;
        if (said_.size() >= 1000) said_.clear();
        said_.insert(key);
        if (log_) log_(native ? message + " (the entities concerned use their native AI)" : message);
    }

private:
    std::unordered_set<std::string> said_;
    Logger log_;
};

}  // namespace npcmind
