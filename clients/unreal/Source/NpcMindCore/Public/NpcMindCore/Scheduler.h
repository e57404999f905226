// The decision scheduler (no I/O, no clock): what to ask /v1/decide and when, and what its answers mean.
//
// Every method that depends on time is given `now` (ms on the game's clock). It keeps the game's obligations: an
// answer for an old epoch is dropped, an action is re-checked against the legal actions sent (and those of now),
// a decision expires after its ttl_ms, every fallback or error gives nullopt (the game's native AI, never an
// invented action). A port of the C# SDK's Scheduler.cs, checked by the same conformance cases.
#pragma once

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "NpcMindCore/Answer.h"
#include "NpcMindCore/Cascade.h"
#include "NpcMindCore/Lines.h"
#include "NpcMindCore/Outbox.h"
#include "NpcMindCore/Refusals.h"
#include "NpcMindCore/Roster.h"
#include "NpcMindCore/Session.h"
#include "NpcMindCore/Timings.h"

namespace npcmind {

/// How a scheduler is set up; the defaults are the other SDKs'.
struct SchedulerOptions {
    std::string ClientId = "c1";
    int Epoch = 0;
    Value World;
    std::optional<std::string> Scope;
    Value ScopeState;
    std::string ApiKey;
    std::optional<double> RefreshMs;
    double EventWindowMs = 50;
    double TelemetryMs = 500;
    /// The cascade's local policy: a distilled file or a function; sure choices decide here.
    LocalPolicy Policy;
    double Threshold = 0.8;
    /// Use the service's distilled policy (GET /v1/policy); by default on when no Policy is given.
    std::optional<bool> FetchPolicy;
    double PolicyRefreshMs = Cascade::DefaultPolicyRefreshMs;
    size_t PolicyMaxBytes = Policy::MaxBytes;
    std::optional<double> TimeoutMs;
    /// Decide requests in flight at most: a wave of refreshes is spread over frames.
    int MaxInFlight = 4;
    /// The manifest when it is known already (what GET /v1/manifest answers as `manifest`); else asked.
    Value Manifest;
    /// The version of that manifest: the service's policy is fetched for it.
    std::string ManifestVersion;
    /// Decide answers asked as a stream of lines (docs/streaming.md), on by default as in the other SDKs.
    bool Stream = true;
    Logger Log;
};

/// The decisions core: track entities, call Tick for the requests to send, give back their answers.
class Scheduler : private IOutboxHost {
public:
    /// The protocol's limit of entities a decide request.
    static constexpr int Batch = 16;
    /// The service's provider deadline, until GET /v1/health tells its own.
    static constexpr double DefaultDeadlineMs = 10000;
    /// Past the deadline: the service's own work and the network.
    static constexpr double TimeoutMarginMs = 5000;
    /// The reason of the fallback of an entity a cut stream did not reach.
    static constexpr const char* Cut = "the decision stream was cut";

    Stats Counters;
    const std::string ClientId;
    Value World;
    std::optional<std::string> Scope;
    Value ScopeState;

    explicit Scheduler(SchedulerOptions options);
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    /// The per-entity rules: Track, Event, Action, SetEpoch go there.
    Roster& Entities() { return *roster_; }
    Cascade& Policies() { return *cascade_; }
    /// The game's epoch: answers to requests sent under another epoch are dropped.
    int Epoch() const { return roster_->Epoch; }
    /// A new scene (level, map): the service resets its population with the next telemetry.
    void SetScene(const std::string& scene) { outbox_->SetScene(scene); }
    /// An observe-only entity (the player): sent as telemetry, never asked.
    void Observe(const std::string& id, const std::string& type, const Value& fields,
                 const std::optional<std::vector<double>>& position = std::nullopt) {
        outbox_->Observe(id, type, fields, position);
    }
    /// The entity left the scene (died, despawned): forget it and tell the service.
    void Untrack(const std::string& id);
    /// What became of the entity's current AI decision; false when it has none to report.
    bool Report(const std::string& id, const std::string& outcome, const std::string& detail = "");
    /// How long a request may take: the one given, else the service's deadline plus 5 s once it told it.
    double TimeoutMs() const { return timeout_; }
    /// Requests sent and not yet answered (telemetry and reports are the outbox's, not counted).
    size_t InFlight() const { return sent_.size(); }
    /// Entities tracked (that decide).
    size_t Size() const { return roster_->Entities.Count(); }
    /// The headers a request of this client carries (a hosted session's token).
    Headers RequestHeaders() const { return session_ ? session_->RequestHeaders() : Headers(); }
    /// What is due now, in the order to send: session, manifest, policy, telemetry, reports, decisions.
    std::vector<OutRequest> Tick(double now);
    /// Send every queued report now (before closing, or for a turn-based game).
    std::vector<OutRequest> FlushReports();
    /// An answer came back for `ref`: applied by the request's kind. `text`: the body as received (a policy is
    /// loaded from it); `body`: it parsed (null when it is not JSON).
    void Answer(const std::string& ref, int status, const Value& body, const Headers& headers, double now,
                const std::string* text = nullptr);
    /// A request got no answer: said once, then undone by its kind.
    void Fail(const std::string& ref, FailKind kind, double now, const std::string& error = "");
    /// Bytes of `ref`'s streamed answer (a 200 in NDJSON): each line they complete is applied at once.
    void Chunk(const std::string& ref, std::string_view data, double now);
    /// `ref`'s streamed answer ended (a partial line is discarded); `failed`: the transport ended it.
    void End(const std::string& ref, double now, std::optional<FailKind> failed = std::nullopt,
             const std::string& error = "");

private:
    enum class Kind { Decide, Manifest, Health, Session, Policy };
    struct Sent {
        Kind What = Kind::Decide;
        int Epoch = 0;
        /// The entities asked, in the request's order, with the legal actions sent for each.
        std::vector<std::pair<std::string, std::vector<std::string>>> Legal;
        double At = 0;
        std::unique_ptr<Lines> Stream;
        bool Whole = false;
        int LinesRead = 0;
    };

    // IOutboxHost
    std::optional<OutRequest> Post(const std::string& path, Value body, const std::vector<std::string>& after) override;
    Refusals& HostRefusals() override { return *refusals_; }
    bool Tracked(const std::string& id) override { return roster_->Entities.Contains(id); }
    void Warn(const std::string& key, const std::string& message, bool native) override {
        said_->Say(key, message, native);
    }

    void Remember(const std::string& ref, std::unique_ptr<Sent> s);
    std::unique_ptr<Sent> Take(const std::string& ref);
    Sent* Streaming(const std::string& ref);
    void Ended(Sent& s, double now);
    void ApplyLine(const std::string& ref, Sent& s, const StreamLine& got, double now);
    void AskManifest(std::vector<OutRequest>& output, bool again);
    void Ask(double now, std::vector<OutRequest>& output);
    void SendBatch(const std::vector<Entity*>& batch, std::vector<OutRequest>& output, double now);
    void ApplyDecide(Sent& s, int status, const Value& body, const Headers& headers, double now);
    void ApplyDecision(Sent& s, const Decision& d, double now);
    void ManifestAnswered(int status, const Value& body, double now);
    void SessionAnswered(int status, const Value& body, double now);
    void Refused(int status, const Value& body, const Headers& headers, double now);
    void Failed(FailKind kind, const std::string& error);
    std::optional<OutRequest> Make(const std::string& method, const std::string& path, const Value& body,
                                   const std::vector<std::string>& after, const Headers* headers,
                                   std::string* error = nullptr);
    static Value EntityItem(const Entity& e);
    std::vector<std::string> Ids(const Sent& s) const;

    int maxInFlight_;
    std::unique_ptr<SayOnce> said_;
    std::unique_ptr<Refusals> refusals_;
    std::unique_ptr<Cascade> cascade_;
    std::unique_ptr<Roster> roster_;
    bool timeoutGiven_;
    double timeout_;
    std::unique_ptr<Session> session_;
    std::unique_ptr<Outbox> outbox_;
    std::unique_ptr<Timings> timings_;
    bool stream_;
    std::unordered_map<std::string, std::unique_ptr<Sent>> sent_;
    std::vector<std::string> sentOrder_;  // health and manifest refs, in the order sent
    int refs_ = 0;
    int decidesInFlight_ = 0;
    double notBefore_ = -std::numeric_limits<double>::infinity();  // after a 429 or a service that is down
};

}  // namespace npcmind
