// The per-entity rules.
#include "NpcMindCore/Roster.h"

#include <algorithm>

#include "NpcMindCore/Errors.h"

namespace npcmind {

namespace {
bool Contains(const std::vector<std::string>& list, const std::string& s) {
    return std::find(list.begin(), list.end(), s) != list.end();
}
}  // namespace

Entity* OrderedEntities::Find(const std::string& id) const {
    auto f = byId_.find(id);
    return f == byId_.end() ? nullptr : f->second.get();
}

Entity& OrderedEntities::Add(const std::string& id) {
    auto e = std::make_unique<Entity>();
    e->Id = id;
    Entity* raw = e.get();
    byId_.emplace(id, std::move(e));
    order_.push_back(raw);
    return *raw;
}

bool OrderedEntities::Remove(const std::string& id) {
    auto f = byId_.find(id);
    if (f == byId_.end()) return false;
    removed_.push_back(std::move(f->second));
    byId_.erase(f);
    holes_ = true;
    return true;
}

const std::vector<Entity*>& OrderedEntities::Values() {
    if (holes_) {
        order_.erase(std::remove_if(order_.begin(), order_.end(),
                                    [this](Entity* e) {
                                        auto f = byId_.find(e->Id);
                                        return f == byId_.end() || f->second.get() != e;
                                    }),
                     order_.end());
        removed_.clear();
        holes_ = false;
    }
    return order_;
}

Roster::Roster(int epoch, double windowMs, Chooser choose, double threshold, Stats& stats, SayOnce& say)
    : Epoch(epoch), Choose(std::move(choose)), Threshold(threshold), windowMs_(windowMs), stats_(stats), say_(say) {}

void Roster::Track(const std::string& id, const std::string& type, const Value& observation,
                   const std::vector<std::string>& legalActions, const TrackOptions& options, double now) {
    Entity* e = Entities.Find(id);
    if (!e) {
        e = &Entities.Add(id);
        e->Due = now;
        e->AskedAt = -std::numeric_limits<double>::infinity();
        e->Place = places_++;
    } else if (e->Type != type) {
        e->Current.reset();
        e->Due = now;
    }
    e->Type = type;
    e->Observation = observation;  // shared, as the other SDKs keep it by reference; written out per request
    e->LegalActions = legalActions;
    e->Extra = options;
    e->Changed = true;
}

bool Roster::Event(const std::string& id, const std::string& trigger, double now) {
    Entity* e = Entities.Find(id);
    if (!e) {
        say_.Say("event:" + trigger,
                 "event(" + Json::Quote(id) + ", " + Json::Quote(trigger) + ") for an entity not tracked: ignored", false);
        return false;
    }
    e->Trigger = trigger;
    if (now >= windowEnd_) windowEnd_ = now + windowMs_;  // the first event of a moment opens a window
    e->Due = std::min(e->Due, windowEnd_);                // the next ones join it
    return true;
}

Value Roster::Report(const std::string& id, const std::string& outcome, const std::string& detail) {
    if (!Contains(Outcomes::All(), outcome)) {
        say_.Say("outcome:" + outcome, "report(" + Json::Quote(id) + ", " + Json::Quote(outcome) +
                                           "): the outcome must be one of done, failed, interrupted, rejected; not sent",
                 false);
        return Value();
    }
    Entity* e = Entities.Find(id);
    if (!e || !e->Current || !e->Current->DecisionId) return Value();
    Value item = Value::MakeObject();
    item.Set("decision_id", *e->Current->DecisionId);
    item.Set("outcome", outcome);
    if (!detail.empty()) item.Set("detail", detail.size() > 200 ? detail.substr(0, 200) : detail);
    return item;
}

std::optional<Choice> Roster::Action(const std::string& id, const std::vector<std::string>* legalNow, double now) {
    Entity* e = Entities.Find(id);
    if (!e || !e->Current) return std::nullopt;
    if (now >= e->Current->ExpiresAt) {
        e->Current.reset();
        return std::nullopt;
    }
    if (!Contains(legalNow ? *legalNow : e->LegalActions, e->Current->Action)) return std::nullopt;
    return e->Current;
}

void Roster::SetEpoch(int value, double now) {
    if (value == Epoch) return;
    Epoch = value;
    for (Entity* e : Entities.Values()) {
        e->Current.reset();
        e->Due = std::min(e->Due, now);
    }
}

void Roster::Population(double now) {
    if (Entities.Count() != count_) {
        count_ = Entities.Count();
        reaskPending_ = true;
    }
    if (reaskPending_ && now - lastReask_ >= ReaskGapMs) {
        reaskPending_ = false;
        lastReask_ = now;
        for (Entity* e : Entities.Values()) e->Due = std::min(e->Due, now);
    }
}

bool Roster::Local(Entity& e, double now, double ttl) {
    if (!Choose) return false;
    std::optional<PolicyChoice> got = Choose(e);
    if (!got || got->Action.empty()) return false;
    if (!(got->Confidence >= Threshold) || !Contains(e.LegalActions, got->Action)) return false;
    Choice c;
    c.Action = got->Action;
    c.Source = "local";
    c.Confidence = got->Confidence;
    c.ExpiresAt = now + ttl;
    e.Current = c;
    e.Trigger.reset();
    stats_.Local++;
    return true;
}

void Roster::Use(Entity& e, const Decision& d, const std::vector<std::string>& legal, double now) {
    e.InFlight = false;
    if (d.Source == "AI") {
        if (!Contains(legal, d.Action)) {
            stats_.Illegal++;
            e.Current.reset();
            return;
        }
        stats_.Ai++;
        if (d.Cached) stats_.Cached++;
        Choice c;
        c.Action = d.Action;
        c.Source = "AI";
        c.Confidence = d.Confidence;
        c.ExpiresAt = now + d.TtlMs;
        c.DecisionId = d.DecisionId;
        c.Cached = d.Cached;
        c.Label = d.Label;
        e.Current = c;
        return;
    }
    stats_.Fallbacks[d.Code]++;
    e.Current.reset();
    if (d.Code == "budget")
        say_.Say("budget:" + e.Type, e.Type + " " + Json::Quote(e.Id) + " is over its token budget: " + d.Reason);
    else if (d.Code == "unavailable" || d.Code == "busy")
        say_.Say(d.Code + ":" + Errors::Unnumbered(d.Reason), "npcmind fell back with '" + d.Code + "': " + d.Reason);
}

void Roster::Release(const std::vector<std::string>& ids, std::optional<double> due,
                     const std::vector<std::pair<std::string, std::string>>* keep) {
    for (const auto& id : ids) {
        Entity* e = Entities.Find(id);
        if (!e || !e->InFlight) continue;
        e->InFlight = false;
        bool kept = false;
        if (keep)
            for (const auto& k : *keep) kept = kept || k.first == id;
        if (due && !kept) e->Due = std::min(e->Due, *due);
    }
}

const std::vector<std::string>& Outcomes::All() {
    static const std::vector<std::string> all = {"done", "failed", "interrupted", "rejected"};
    return all;
}

}  // namespace npcmind
