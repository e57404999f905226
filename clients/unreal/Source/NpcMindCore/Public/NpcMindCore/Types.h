// The SDK's shared shapes: what the game tells about an entity, what it gets back, and what goes on the wire
// (the C# SDK's Types.cs, the same names).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "NpcMindCore/Json.h"

namespace npcmind {

/// The outcomes a report may tell (POST /v1/report).
struct Outcomes {
    static const std::vector<std::string>& All();
};

/// A usable decision for one entity: from the model (`AI`, fresh or cached) or the local policy (`local`).
struct Choice {
    std::string Action;
    std::string Source;
    std::optional<double> Confidence;
    /// On the client's clock, in ms.
    double ExpiresAt = 0;
    std::optional<std::string> DecisionId;
    bool Cached = false;
    std::optional<std::string> Label;
};

/// What the game may add to an entity beside its observation and legal actions.
struct TrackOptions {
    std::optional<std::vector<double>> Position;
    std::optional<std::string> Profile;
    std::optional<std::string> Parent;
    std::optional<std::string> State;
};

/// What the game tells about one entity; the SDK's own bookkeeping sits beside it.
struct Entity {
    std::string Id;
    std::string Type;
    Value Observation;
    std::vector<std::string> LegalActions;
    TrackOptions Extra;
    std::optional<std::string> Trigger;
    double Due = 0;
    double AskedAt = 0;
    bool InFlight = false;
    std::optional<Choice> Current;
    /// Changed since the last telemetry.
    bool Changed = false;
    /// Its place in the order tracked (requests carry entities in that order).
    uint64_t Place = 0;
};

/// An action and how sure a local policy is of it (0..1).
struct PolicyChoice {
    std::string Action;
    double Confidence = 0;
};

/// A local policy function for cascade mode: its choice, or nullopt (or an empty action) to ask the service.
using PolicyFunction = std::function<std::optional<PolicyChoice>(const Entity&)>;

/// Counters a game can show in a debug overlay; the tests read them too.
struct Stats {
    int Requests = 0;
    int Asked = 0;
    int Ai = 0;
    int Cached = 0;
    int Local = 0;
    std::map<std::string, int> Fallbacks;
    int DroppedEpoch = 0;
    int Illegal = 0;
    int Errors = 0;
    int ReportsSent = 0;
    /// Times the service refused an entity as malformed (it then goes alone until taken).
    int Refused = 0;
    /// Decisions applied from a streamed answer's lines, and the ms from their request's send to their line's
    /// arrival, summed.
    int StreamedDecisions = 0;
    double StreamedMsTotal = 0;
    /// Streamed answers that ended before their last line (their entities fell back).
    int StreamsCut = 0;
};

/// A request the core wants sent: the transport executes it after every ref in `After` has settled.
struct OutRequest {
    std::string Ref;
    std::string Method;
    std::string Path;
    /// Lowercase names to values (a hosted session's `authorization`).
    std::vector<std::pair<std::string, std::string>> Headers;
    /// The body (null for a GET); `Json` is its text, written when the request was made (a snapshot).
    Value Body;
    std::string Json;
    std::vector<std::string> After;
    /// A decide request whose answer is asked as a stream of lines (`Accept: application/x-ndjson`).
    bool Stream = false;
};

/// Why a request got no answer.
enum class FailKind { Timeout, Unreachable, TooLarge };

/// Where the SDK says a problem (once: a game loop would repeat it every frame).
using Logger = std::function<void(const std::string&)>;

}  // namespace npcmind
