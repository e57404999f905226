// The decision scheduler: the C# SDK's Scheduler.cs, line for line where it can be.
#include "NpcMindCore/Scheduler.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "NpcMindCore/Errors.h"
#include "NpcMindCore/Limits.h"

namespace npcmind {

Scheduler::Scheduler(SchedulerOptions o)
    : ClientId(o.ClientId),
      World(o.World.IsObject() ? o.World.ShallowCopy() : Value::MakeObject()),
      Scope(o.Scope),
      ScopeState(o.ScopeState),
      maxInFlight_(o.MaxInFlight),
      timeoutGiven_(o.TimeoutMs.has_value()),
      timeout_(o.TimeoutMs ? *o.TimeoutMs : DefaultDeadlineMs + TimeoutMarginMs),
      stream_(o.Stream) {
    Logger log = o.Log ? o.Log : [](const std::string& m) { std::fprintf(stderr, "npcmind: %s\n", m.c_str()); };
    said_ = std::make_unique<SayOnce>(log);
    refusals_ = std::make_unique<Refusals>(
        [this](const std::string& k, const std::string& m, bool native) { Warn(k, m, native); }, Counters);
    cascade_ = std::make_unique<Cascade>(ClientId, o.Policy, o.FetchPolicy, o.PolicyRefreshMs, *said_,
                                         o.ManifestVersion, o.PolicyMaxBytes);
    Chooser choose = [this](const Entity& e) {
        return cascade_->Choose(e, World, Scope ? ScopeState : Value());
    };
    roster_ = std::make_unique<Roster>(o.Epoch, o.EventWindowMs, choose, o.Threshold, Counters, *said_);
    if (!o.ApiKey.empty()) session_ = std::make_unique<Session>(o.ApiKey);
    outbox_ = std::make_unique<Outbox>(static_cast<IOutboxHost&>(*this), o.TelemetryMs);
    timings_ = std::make_unique<Timings>(o.RefreshMs, o.Manifest);
}

void Scheduler::Untrack(const std::string& id) {
    refusals_->Alone.erase(id);
    bool tracked = roster_->Entities.Remove(id);
    if (outbox_->Forget(id) || tracked) outbox_->Remove(id);
}

bool Scheduler::Report(const std::string& id, const std::string& outcome, const std::string& detail) {
    Value item = roster_->Report(id, outcome, detail);
    if (item.IsNull()) return false;
    outbox_->Report(item);
    return true;
}

std::vector<OutRequest> Scheduler::Tick(double now) {
    std::vector<OutRequest> output;
    if (session_ && session_->Due(now) && now >= notBefore_) {
        Value body = Value::MakeObject();
        body.Set("client_id", ClientId);
        Headers h = session_->KeyHeaders();
        auto r = Make("POST", "/v1/session", body, {}, &h);
        if (r) {
            session_->Pending = r->Ref;
            auto s = std::make_unique<Sent>();
            s->What = Kind::Session;
            Remember(r->Ref, std::move(s));
            output.push_back(std::move(*r));
        }
    }
    if (session_ && !session_->Ready()) return output;  // nothing goes without a token, or one asked for
    bool again = cascade_->RecheckManifest;
    if ((!timings_->Known() || again) && !timings_->Asked && now >= notBefore_) AskManifest(output, again);
    if (cascade_->Due(now) && now >= notBefore_) {
        Headers extra;
        std::string path = cascade_->Request(now, extra);
        Headers headers = RequestHeaders();
        for (auto& kv : extra) headers.push_back(kv);
        auto r = Make("GET", path, Value(), {}, &headers);
        auto s = std::make_unique<Sent>();
        s->What = Kind::Policy;
        Remember(r->Ref, std::move(s));
        output.push_back(std::move(*r));
    }
    roster_->Population(now);
    if (now < notBefore_) return output;  // the service is down or asked us to wait: keep it all for later
    for (auto& r : outbox_->SendTelemetry(now, ClientId, roster_->Epoch, roster_->Entities.Values()))
        output.push_back(std::move(r));
    int count = 0;
    auto reports = outbox_->SendReports(ClientId, count);
    if (reports) output.push_back(std::move(*reports));
    Counters.ReportsSent += count;
    Ask(now, output);
    return output;
}

std::vector<OutRequest> Scheduler::FlushReports() {
    std::vector<OutRequest> output;
    while (outbox_->QueuedReports() > 0) {
        int count = 0;
        auto r = outbox_->SendReports(ClientId, count);
        Counters.ReportsSent += count;
        if (r) output.push_back(std::move(*r));
    }
    return output;
}

void Scheduler::Answer(const std::string& ref, int status, const Value& body, const Headers& headers, double now,
                       const std::string* text) {
    if (outbox_->Owns(ref)) {
        if (outbox_->Answer(ref, status, body)) Refused(status, body, headers, now);
        return;
    }
    auto s = Take(ref);
    if (!s) return;
    switch (s->What) {
        case Kind::Decide: ApplyDecide(*s, status, body, headers, now); break;
        case Kind::Manifest: ManifestAnswered(status, body, now); break;
        case Kind::Health: {
            auto deadline = Timings::DeadlineTimeoutMs(status, body);
            if (!timeoutGiven_ && deadline) timeout_ = *deadline + TimeoutMarginMs;
            break;
        }
        case Kind::Session: SessionAnswered(status, body, now); break;
        case Kind::Policy: {
            bool parsed = text == nullptr;
            if (!cascade_->Answered(status, text ? *text : std::string(), parsed ? &body : nullptr, headers))
                Refused(status, body, headers, now);
            break;
        }
    }
}

void Scheduler::Fail(const std::string& ref, FailKind kind, double now, const std::string& error) {
    Failed(kind, error);
    if (outbox_->Owns(ref)) {
        outbox_->Failed(ref);
        return;
    }
    auto s = Take(ref);
    if (!s) return;
    switch (s->What) {
        case Kind::Decide:
            decidesInFlight_--;
            Counters.Errors++;
            notBefore_ = now + 1000;
            roster_->Release(Ids(*s), std::nullopt);
            break;
        case Kind::Manifest:
            timings_->Asked = false;  // asked again on a later tick; the defaults hold meanwhile
            notBefore_ = std::max(notBefore_, now + 1000);
            break;
        case Kind::Health: break;
        case Kind::Session:
            if (session_ && !session_->Open()) notBefore_ = std::max(notBefore_, now + 1000);
            if (session_) session_->Failed(now);
            break;
        case Kind::Policy: cascade_->Failed(); break;
    }
}

void Scheduler::Chunk(const std::string& ref, std::string_view data, double now) {
    Sent* s = Streaming(ref);
    if (!s) return;
    for (const auto& line : s->Stream->Feed(data)) {
        ApplyLine(ref, *s, Answer::ReadStreamLine(line), now);
        if (!sent_.count(ref)) return;  // ended at its cap: the rest of the chunk is not read
    }
}

Scheduler::Sent* Scheduler::Streaming(const std::string& ref) {
    auto f = sent_.find(ref);
    if (f == sent_.end() || f->second->What != Kind::Decide) return nullptr;
    Sent& s = *f->second;
    if (!s.Stream) {  // the 200: the service took every entity of it
        s.Stream = std::make_unique<Lines>();
        for (const auto& p : s.Legal) refusals_->Alone.erase(p.first);
    }
    return &s;
}

void Scheduler::End(const std::string& ref, double now, std::optional<FailKind> failed, const std::string& error) {
    auto f = sent_.find(ref);
    if (f == sent_.end() || f->second->What != Kind::Decide) return;
    auto s = Take(ref);
    decidesInFlight_--;
    if (failed) Failed(*failed, error);
    Ended(*s, now);
}

void Scheduler::Ended(Sent& s, double now) {
    if (s.Whole) {
        roster_->Release(Ids(s), std::nullopt);  // one the stream did not name: on its refresh
        return;
    }
    Counters.StreamsCut++;
    Counters.Errors++;
    for (const auto& p : s.Legal) {
        Entity* e = roster_->Entities.Find(p.first);
        if (!e || !e->InFlight) continue;
        Decision d;
        d.Id = p.first;
        d.Source = "FALLBACK";
        d.Code = "unavailable";
        d.Reason = Cut;
        roster_->Use(*e, d, p.second, now);
    }
    notBefore_ = now + 1000;  // as after a request that failed: the service may be gone
}

void Scheduler::ApplyLine(const std::string& ref, Sent& s, const StreamLine& got, double now) {
    if (s.Whole) return;  // nothing counts after the last line
    if (++s.LinesRead > Limits::MaxStreamLines) {  // lines for ids never asked, without end: no more read
        auto taken = Take(ref);
        decidesInFlight_--;
        Warn("stream-lines", "the decision stream passed " + std::to_string(Limits::MaxStreamLines) +
                                 " lines (Limits.MaxStreamLines): ended there, the rest not read", true);
        Ended(*taken, now);
        return;
    }
    if (got.Is == StreamLine::Kind::Problem) {  // that entity is left without a line
        Counters.Errors++;
        Warn("malformed-line", "a line of the decision stream could not be read: " + got.Problem, true);
        return;
    }
    if (got.Is == StreamLine::Kind::End) {
        s.Whole = true;
        return;
    }
    if (s.Epoch != roster_->Epoch) {  // asked for a state the game has left: every line is stale
        if (!s.Legal.empty()) {
            Counters.DroppedEpoch++;
            roster_->Release(Ids(s), now);  // asked again at once, for the epoch of now
            s.Legal.clear();
        }
        return;
    }
    const Decision& d = got.Got;
    auto at = std::find_if(s.Legal.begin(), s.Legal.end(), [&](const auto& p) { return p.first == d.Id; });
    if (at == s.Legal.end()) return;  // not asked, or answered already
    std::vector<std::string> legal = std::move(at->second);
    s.Legal.erase(at);
    Entity* e = roster_->Entities.Find(d.Id);
    if (!e) return;  // untracked meanwhile
    roster_->Use(*e, d, legal, now);
    Counters.StreamedDecisions++;
    Counters.StreamedMsTotal += now - s.At;
}

void Scheduler::Remember(const std::string& ref, std::unique_ptr<Sent> s) {
    if (s->What == Kind::Health || s->What == Kind::Manifest) sentOrder_.push_back(ref);
    sent_[ref] = std::move(s);
}

std::unique_ptr<Scheduler::Sent> Scheduler::Take(const std::string& ref) {
    auto f = sent_.find(ref);
    if (f == sent_.end()) return nullptr;
    auto s = std::move(f->second);
    sent_.erase(f);
    sentOrder_.erase(std::remove(sentOrder_.begin(), sentOrder_.end(), ref), sentOrder_.end());
    return s;
}

std::vector<std::string> Scheduler::Ids(const Sent& s) const {
    std::vector<std::string> ids;
    for (const auto& p : s.Legal) ids.push_back(p.first);
    return ids;
}

// --- scheduling ----------------------------------------------------------------------------------------------

void Scheduler::AskManifest(std::vector<OutRequest>& output, bool again) {
    if (!timeoutGiven_ && !again) {
        auto health = Make("GET", "/v1/health", Value(), {}, nullptr);
        auto s = std::make_unique<Sent>();
        s->What = Kind::Health;
        Remember(health->Ref, std::move(s));
        output.push_back(std::move(*health));
    }
    auto r = Make("GET", "/v1/manifest", Value(), {}, nullptr);
    timings_->Asked = true;
    auto s = std::make_unique<Sent>();
    s->What = Kind::Manifest;
    Remember(r->Ref, std::move(s));
    output.push_back(std::move(*r));
}

void Scheduler::Ask(double now, std::vector<OutRequest>& output) {
    int free = maxInFlight_ - decidesInFlight_;
    if (free <= 0) return;
    std::vector<Entity*> due;
    for (Entity* e : roster_->Entities.Values())
        if (e->Due <= now && !e->InFlight) due.push_back(e);
    if (due.empty()) return;
    // events first, then the longest due, then the order tracked (a stable sort keeps it)
    std::stable_sort(due.begin(), due.end(), [](const Entity* a, const Entity* b) {
        bool ea = a->Trigger.has_value(), eb = b->Trigger.has_value();
        if (ea != eb) return ea;
        return a->Due < b->Due;
    });
    std::vector<Entity*> asked;
    long room = static_cast<long>(free) * Batch;  // entities the free requests carry; one alone takes a whole one
    for (Entity* e : due) {
        room -= refusals_->Alone.count(e->Id) ? Batch : 1;
        if (room < 0) break;  // the rest stay due: next tick
        double refresh, ttl;
        timings_->Of(e->Type, refresh, ttl);
        e->Due = now + refresh;
        e->AskedAt = now;
        if (roster_->Local(*e, now, ttl)) continue;
        asked.push_back(e);
    }
    std::vector<Entity*> together;
    for (Entity* e : asked)
        if (!refusals_->Alone.count(e->Id)) together.push_back(e);
    for (size_t i = 0; i < together.size(); i += Batch) {
        std::vector<Entity*> part(together.begin() + static_cast<long>(i),
                                  together.begin() + static_cast<long>(std::min(together.size(), i + Batch)));
        SendBatch(part, output, now);
    }
    for (Entity* e : asked)
        if (refusals_->Alone.count(e->Id)) SendBatch({e}, output, now);  // so it cannot sink the others
}

void Scheduler::SendBatch(const std::vector<Entity*>& batch, std::vector<OutRequest>& output, double now) {
    Value body = Value::MakeObject();
    body.Set("client_id", ClientId);
    body.Set("epoch", roster_->Epoch);
    body.Set("world", World);
    Value items = Value::MakeArray();
    for (Entity* e : batch) items.Push(EntityItem(*e));
    body.Set("entities", items);
    if (Scope) {
        body.Set("scope", *Scope);
        if (!ScopeState.IsNull()) body.Set("scope_state", ScopeState);
    }
    std::vector<std::string> after = outbox_->PendingTelemetry();  // its prompt shows the scene as last told
    for (const auto& r : sentOrder_) after.push_back(r);           // health and manifest still out: the timings
    auto r = Post("/v1/decide", body, after);
    if (!r) return;
    std::unordered_set<std::string> kept;
    for (const auto& i : r->Body["entities"].Items()) kept.insert(i["id"].AsString());
    auto s = std::make_unique<Sent>();
    s->What = Kind::Decide;
    s->Epoch = roster_->Epoch;
    s->At = now;
    for (Entity* e : batch) {
        if (!kept.count(e->Id)) continue;
        e->InFlight = true;
        e->Trigger.reset();
        s->Legal.emplace_back(e->Id, e->LegalActions);
    }
    r->Stream = stream_;
    Counters.Requests++;
    Counters.Asked += static_cast<int>(s->Legal.size());
    decidesInFlight_++;
    Remember(r->Ref, std::move(s));
    output.push_back(std::move(*r));
}

// --- answers -------------------------------------------------------------------------------------------------

void Scheduler::ApplyDecide(Sent& s, int status, const Value& body, const Headers& headers, double now) {
    decidesInFlight_--;
    std::vector<std::string> ids = Ids(s);
    if (status != 200) {
        Counters.Errors++;
        std::vector<std::pair<std::string, std::string>> types;
        for (const auto& p : s.Legal) {
            Entity* e = roster_->Entities.Find(p.first);
            types.emplace_back(p.first, e ? e->Type : "entity");
        }
        auto bad = refusals_->Entities(status, body, types);
        if (bad) {
            roster_->Release(ids, now, &*bad);  // the others are asked again at once, without them
            return;
        }
        Refused(status, body, headers, now);
        // a session that ended under us: asked again soon, with a new session
        roster_->Release(ids, status == 401 && session_ ? std::optional<double>(now) : std::nullopt);
        return;
    }
    for (const auto& id : ids) refusals_->Alone.erase(id);  // taken: it may go with the others again
    DecideResponse answer;
    std::string problem;
    if (!Answer::ReadDecideResponse(body, answer, problem)) {
        problem = Errors::ErrorLine(body, problem);
        Counters.Errors++;
        Warn("malformed", "the answer to /v1/decide could not be read: " + problem, true);
        roster_->Release(ids, std::nullopt);
        return;
    }
    if (answer.Epoch != roster_->Epoch || s.Epoch != roster_->Epoch) {
        Counters.DroppedEpoch++;
        roster_->Release(ids, now);  // asked again at once, for the epoch of now
        return;
    }
    for (const auto& d : answer.Decisions) ApplyDecision(s, d, now);
    roster_->Release(ids, std::nullopt);
}

void Scheduler::ApplyDecision(Sent& s, const Decision& d, double now) {
    Entity* e = roster_->Entities.Find(d.Id);
    if (!e) return;  // untracked meanwhile
    for (const auto& p : s.Legal)
        if (p.first == d.Id) {
            roster_->Use(*e, d, p.second, now);
            return;
        }
    // not asked in this request: not the answer's to give
}

void Scheduler::ManifestAnswered(int status, const Value& body, double now) {
    std::vector<Entity*> all = roster_->Entities.Values();
    if (!timings_->Read(status, body, all)) {
        notBefore_ = std::max(notBefore_, now + 1000);  // asked again on a later tick; defaults meanwhile
        return;
    }
    cascade_->Manifest(body["version"].AsString());
}

void Scheduler::SessionAnswered(int status, const Value& body, double now) {
    std::string why = session_ ? session_->Answer(status, body, now) : "";
    if (why.empty()) return;
    Warn("session:" + Errors::Unnumbered(why), why, true);
    if (!session_->Open()) notBefore_ = std::max(notBefore_, now + 1000);
}

void Scheduler::Refused(int status, const Value& body, const Headers& headers, double now) {
    if (status == 429 || status >= 500) notBefore_ = now + Refusals::RetryAfterMs(headers);
    if (status == 401 && session_) {
        session_->Expire();                            // a new session with the next request
        notBefore_ = std::max(notBefore_, now + 250);  // not a request a frame if it keeps failing
    }
    refusals_->Said(status, body, session_ != nullptr);
}

void Scheduler::Failed(FailKind kind, const std::string& error) {
    if (kind == FailKind::TooLarge) {
        Warn("too-large:" + Errors::Unnumbered(error), error.empty() ? "an answer passed one of the SDK's caps" : error,
             true);
    } else if (kind == FailKind::Timeout) {
        std::string why = timeoutGiven_ ? "its model may take up to NPCMIND_DEADLINE_MS: leave TimeoutMs out to follow it"
                                        : "5 s past its own deadline for the model: it is overloaded or stalled";
        Warn("timeout", "npcmind did not answer within " + Json::EsNumber(timeout_ / 1000) + " s (" + why + ")", true);
    } else {
        Warn("transport", "npcmind is unreachable", true);
    }
}

// --- requests ------------------------------------------------------------------------------------------------

std::optional<OutRequest> Scheduler::Make(const std::string& method, const std::string& path, const Value& body,
                                          const std::vector<std::string>& after, const Headers* headers,
                                          std::string* error) {
    OutRequest r;
    if (!body.IsNull() && !Json::Write(body, r.Json, error)) return std::nullopt;  // first: it takes no ref
    r.Ref = "r" + std::to_string(++refs_);
    r.Method = method;
    r.Path = path;
    r.Body = body;
    if (path != "/v1/session") {
        if (session_)
            for (auto& a : session_->Awaited()) r.After.push_back(a);
        for (const auto& a : after) r.After.push_back(a);
    }
    r.Headers = headers ? *headers : RequestHeaders();
    return r;
}

std::optional<OutRequest> Scheduler::Post(const std::string& path, Value body, const std::vector<std::string>& after) {
    auto r = Make("POST", path, body, after, nullptr);
    if (r) return r;
    // one entity holds what JSON cannot carry (NaN, infinity): the others still go
    if (body["entities"].IsArray()) {
        Value kept = Value::MakeArray();
        for (const auto& item : body["entities"].Items()) {
            std::string text, why;
            if (Json::Write(item, text, &why)) {
                kept.Push(item);
                continue;
            }
            const std::string& id = item["id"].AsString();
            Warn("encode:" + id, item["type"].AsString() + " " + Json::Quote(id) + " cannot be sent as JSON (" + why +
                                     "): left out", true);
        }
        body.Set("entities", kept);
    }
    if (body["entities"].Size() == 0 && body["removed"].Size() == 0 && !body.Has("scene")) return std::nullopt;
    std::string why;
    r = Make("POST", path, body, after, nullptr, &why);
    if (!r) Warn("encode:" + why, "a request cannot be sent as JSON (" + why + "): skipped", true);
    return r;
}

Value Scheduler::EntityItem(const Entity& e) {
    Value item = Value::MakeObject();
    item.Set("id", e.Id);
    item.Set("type", e.Type);
    item.Set("observation", e.Observation);
    item.Set("legal_actions", Value::Strings(e.LegalActions));
    if (e.Extra.Position) item.Set("position", Value::Numbers(*e.Extra.Position));
    if (e.Extra.Profile) item.Set("profile", *e.Extra.Profile);
    if (e.Extra.Parent) item.Set("parent", *e.Extra.Parent);
    if (e.Trigger) item.Set("trigger", *e.Trigger);
    return item;
}

}  // namespace npcmind
