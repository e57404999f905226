// The decisions client a game ticks once a frame: the scheduler's requests sent through an IHttpSender (in the
// order and after the requests they wait for), their answers and streamed lines given back, the hosted session's
// token put in the requests made while it was asked for. A port of the C# SDK's DecideClient and Transport.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "NpcMindCore/Scheduler.h"
#include "NpcMindCore/Transport.h"

namespace npcmind {

/// The decisions client: Track, Action, Event, Report, SetEpoch, and Tick once a frame.
class DecideClient {
public:
    /// `serviceUrl`: http(s)://host:port; `clock`: the game's time in ms.
    DecideClient(std::string serviceUrl, SchedulerOptions options, IHttpSender& http, std::function<double()> clock);
    Scheduler& Core() { return scheduler_; }
    void Track(const std::string& id, const std::string& type, const Value& observation,
               const std::vector<std::string>& legalActions, const TrackOptions& options = TrackOptions()) {
        scheduler_.Entities().Track(id, type, observation, legalActions, options, clock_());
    }
    /// The entity's live decision, or nullopt: run the game's native AI.
    std::optional<Choice> Action(const std::string& id, const std::vector<std::string>* legalNow = nullptr) {
        return scheduler_.Entities().Action(id, legalNow, clock_());
    }
    bool Event(const std::string& id, const std::string& trigger) {
        return scheduler_.Entities().Event(id, trigger, clock_());
    }
    bool Report(const std::string& id, const std::string& outcome, const std::string& detail = "") {
        return scheduler_.Report(id, outcome, detail);
    }
    void Untrack(const std::string& id) { scheduler_.Untrack(id); }
    int Epoch() const { return scheduler_.Epoch(); }
    void SetEpoch(int epoch) { scheduler_.Entities().SetEpoch(epoch, clock_()); }
    void SetScene(const std::string& scene) { scheduler_.SetScene(scene); }
    const Stats& Counters() const { return scheduler_.Counters; }
    /// The frame's work: what arrived is given to the scheduler, and what is due is sent. Never blocks.
    void Tick();
    /// Requests waiting for others or out.
    size_t Outstanding() const { return outstanding_.size(); }

private:
    struct Waiting {
        OutRequest Request;
    };
    void Dispatch();
    void Start(OutRequest r);

    std::string base_;
    Scheduler scheduler_;
    IHttpSender& http_;
    std::function<double()> clock_;
    std::deque<OutRequest> waiting_;
    std::unordered_set<std::string> outstanding_;       // refs waiting or in flight
    std::unordered_map<std::string, std::string> tokens_;  // a session request's ref -> the token it brought
};

/// A service URL as given, without its trailing slashes; "" when it is not http(s)://...
std::string HttpUrl(const std::string& url);

/// A value made safe for a URL's path or query (RFC 3986: unreserved ASCII kept, every other byte %XX).
std::string UrlEscape(const std::string& s);

}  // namespace npcmind
