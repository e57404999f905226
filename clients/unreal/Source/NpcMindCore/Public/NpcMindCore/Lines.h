// The lines of a streamed decide answer (NDJSON, docs/streaming.md), assembled from the bytes as they arrive: a
// line is read only once complete (a newline byte never falls inside a UTF-8 character), a partial line left when
// the stream ends is discarded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npcmind {

/// The complete lines of one stream so far, and the part of a line still coming.
class Lines {
public:
    /// A decision line is a few hundred bytes; past this it is not npcmind's: dropped.
    static constexpr size_t MaxLine = 64 * 1024;
    /// Lines dropped for being past MaxLine (for the scheduler to say).
    int Overlong = 0;

    /// The lines this chunk completes (without their newline, trimmed; a blank line is skipped), in order.
    std::vector<std::string> Feed(std::string_view data);
    /// Whether a line was left incomplete (the stream cut mid-line).
    bool Partial() const { return !rest_.empty() || skipping_; }

private:
    std::string rest_;
    bool skipping_ = false;
};

}  // namespace npcmind
