// Lines from bytes, each byte looked at once.
#include "NpcMindCore/Lines.h"

namespace npcmind {

namespace {
bool Space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
}  // namespace

std::vector<std::string> Lines::Feed(std::string_view data) {
    std::vector<std::string> out;
    for (char b : data) {
        if (b != '\n') {
            if (skipping_) continue;
            rest_.push_back(b);
            if (rest_.size() > MaxLine) {  // no newline coming soon: keep none of it
                Overlong++;
                skipping_ = true;
                rest_.clear();
            }
            continue;
        }
        if (skipping_) {  // the end of the line too long to keep
            skipping_ = false;
            continue;
        }
        size_t a = 0, z = rest_.size();
        while (a < z && Space(rest_[a])) a++;
        while (z > a && Space(rest_[z - 1])) z--;
        if (z > a) out.emplace_back(rest_.substr(a, z - a));
        rest_.clear();
    }
    return out;
}

}  // namespace npcmind
