// Telemetry and reports (no I/O): what the game told, sent as the service's population and outcomes.
#pragma once

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "NpcMindCore/Refusals.h"
#include "NpcMindCore/Types.h"

namespace npcmind {

/// How the outbox makes a request (the scheduler's refs, headers and encoding) and tells what it met.
class IOutboxHost {
public:
    virtual ~IOutboxHost() = default;
    /// A POST made now, or nullopt when nothing of the body could be written.
    virtual std::optional<OutRequest> Post(const std::string& path, Value body, const std::vector<std::string>& after) = 0;
    /// Entities the service refused as malformed: sent alone from now on (the scheduler's).
    virtual Refusals& HostRefusals() = 0;
    /// Whether an entity decides (tracked): those are released from going alone by /v1/decide.
    virtual bool Tracked(const std::string& id) = 0;
    virtual void Warn(const std::string& key, const std::string& message, bool native) = 0;
};

/// Queues telemetry (changed entities only, scene and removals with the first part) and reports.
class Outbox {
public:
    static constexpr int TelemetryBatch = 1000;
    static constexpr int ReportsARequest = 256;
    /// Held while the service is unreachable; beyond it the oldest tenth goes.
    static constexpr size_t MaxQueuedReports = 10000;

    Outbox(IOutboxHost& host, double everyMs) : host_(host), everyMs_(everyMs) {}
    /// An observe-only entity (the player): sent as telemetry, never asked.
    void Observe(const std::string& id, const std::string& type, const Value& fields,
                 const std::optional<std::vector<double>>& position);
    /// Forget an observed entity; whether it was one.
    bool Forget(const std::string& id);
    /// An entity left: the service hears it with the next telemetry.
    void Remove(const std::string& id) { removed_.push_back(id); }
    /// A new scene: the service resets its population with the next telemetry.
    void SetScene(const std::string& value) { scene_ = value; }
    /// Queue a report; the oldest tenth goes when the service has been away too long.
    void Report(Value item);
    size_t QueuedReports() const { return reports_.size(); }
    /// One request of queued reports (at most 256), or none; `count`: how many it carries.
    std::optional<OutRequest> SendReports(const std::string& clientId, int& count);
    /// The telemetry due now: bodies to send again first, then, every `everyMs`, what changed.
    std::vector<OutRequest> SendTelemetry(double now, const std::string& clientId, int epoch,
                                          const std::vector<Entity*>& entities);
    /// Refs of the newest telemetry still unanswered: a decide request goes after them.
    std::vector<std::string> PendingTelemetry() const;
    /// Whether a request is the outbox's.
    bool Owns(const std::string& ref) const { return sent_.count(ref) > 0; }
    /// An answer to one of the outbox's requests; true when the service refused the request as a whole.
    bool Answer(const std::string& ref, int status, const Value& body);
    /// A request that got no answer is forgotten (telemetry is sent again when the entities change).
    void Failed(const std::string& ref) { sent_.erase(ref); }

private:
    struct Sent {
        bool Telemetry = false;
        Value Body;
    };
    std::vector<Value> Telemetry(double now, const std::string& clientId, int epoch, const std::vector<Entity*>& entities);
    void Taken(const Value& body);
    void Push(Value body, std::vector<OutRequest>& output);

    IOutboxHost& host_;
    double everyMs_;
    std::unordered_map<std::string, Value> observed_;
    std::vector<std::string> observedOrder_;
    std::vector<std::string> removed_;
    std::optional<std::string> scene_;
    std::vector<Value> reports_;
    size_t reportsStart_ = 0;  // reports before it were sent: dropped from the front in one go now and then
    size_t batch_ = TelemetryBatch;  // halved on a 413: observations too rich for the body limit
    std::unordered_map<std::string, Sent> sent_;
    std::vector<std::string> newest_;
    std::vector<Value> again_;
    double last_ = -std::numeric_limits<double>::infinity();
};

}  // namespace npcmind
