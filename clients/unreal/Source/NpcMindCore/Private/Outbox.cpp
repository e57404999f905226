// Telemetry and reports.
#include "NpcMindCore/Outbox.h"

#include <algorithm>

namespace npcmind {

void Outbox::Observe(const std::string& id, const std::string& type, const Value& fields,
                     const std::optional<std::vector<double>>& position) {
    Value item = Value::MakeObject();
    item.Set("id", id);
    item.Set("type", type);
    item.Set("fields", fields);
    if (position) item.Set("position", Value::Numbers(*position));
    if (!observed_.count(id)) observedOrder_.push_back(id);
    observed_[id] = item;
}

bool Outbox::Forget(const std::string& id) {
    if (!observed_.erase(id)) return false;
    observedOrder_.erase(std::find(observedOrder_.begin(), observedOrder_.end(), id));
    return true;
}

void Outbox::Report(Value item) {
    if (reports_.size() - reportsStart_ >= MaxQueuedReports) {
        reportsStart_ += MaxQueuedReports / 10;
        host_.Warn("reports-dropped",
                   "more than " + std::to_string(MaxQueuedReports) + " reports wait for npcmind: the oldest are dropped",
                   false);
    }
    reports_.push_back(std::move(item));
}

std::optional<OutRequest> Outbox::SendReports(const std::string& clientId, int& count) {
    count = 0;
    size_t queued = reports_.size() - reportsStart_;
    if (queued == 0) return std::nullopt;
    size_t n = std::min<size_t>(ReportsARequest, queued);
    Value taken = Value::MakeArray();
    for (size_t i = 0; i < n; i++) taken.Push(reports_[reportsStart_ + i]);
    reportsStart_ += n;
    if (reportsStart_ == reports_.size() || reportsStart_ > 4096) {  // linear: the sent front goes in one go
        reports_.erase(reports_.begin(), reports_.begin() + static_cast<long>(reportsStart_));
        reportsStart_ = 0;
    }
    count = static_cast<int>(n);
    Value body = Value::MakeObject();
    body.Set("client_id", clientId);
    body.Set("reports", taken);
    auto request = host_.Post("/v1/report", body, {});
    if (request) sent_[request->Ref] = Sent{false, Value()};
    return request;
}

std::vector<OutRequest> Outbox::SendTelemetry(double now, const std::string& clientId, int epoch,
                                              const std::vector<Entity*>& entities) {
    std::vector<Value> first = std::move(again_);
    again_.clear();
    std::vector<Value> bodies = Telemetry(now, clientId, epoch, entities);
    if (!bodies.empty()) newest_.clear();
    std::vector<OutRequest> output;
    for (auto& body : first) Push(body, output);
    for (auto& body : bodies) Push(body, output);
    return output;
}

std::vector<Value> Outbox::Telemetry(double now, const std::string& clientId, int epoch,
                                     const std::vector<Entity*>& entities) {
    std::vector<Value> bodies;
    if (now - last_ < everyMs_) return bodies;
    std::vector<Value> together, alone;
    auto add = [&](const Value& item) {
        (host_.HostRefusals().Alone.count(item["id"].AsString()) ? alone : together).push_back(item);
    };
    for (Entity* e : entities) {
        if (!e->Changed) continue;
        e->Changed = false;
        Value item = Value::MakeObject();
        item.Set("id", e->Id);
        item.Set("type", e->Type);
        item.Set("fields", e->Observation);
        if (e->Extra.Position) item.Set("position", Value::Numbers(*e->Extra.Position));
        if (e->Extra.State) item.Set("state", *e->Extra.State);
        if (e->Extra.Parent) item.Set("parent", *e->Extra.Parent);
        add(item);
    }
    for (const auto& id : observedOrder_) add(observed_[id]);
    if (together.empty() && alone.empty() && removed_.empty() && !scene_) return bodies;
    last_ = now;
    for (size_t i = 0; i < std::max<size_t>(together.size(), 1); i += batch_) {
        Value body = Value::MakeObject();
        body.Set("client_id", clientId);
        body.Set("epoch", epoch);
        Value part = Value::MakeArray();
        for (size_t j = i; j < std::min(together.size(), i + batch_); j++) part.Push(together[j]);
        body.Set("entities", part);
        if (i == 0 && scene_) body.Set("scene", *scene_);
        if (i == 0) body.Set("removed", Value::Strings(removed_));
        bodies.push_back(body);
    }
    if (!alone.empty()) {  // cannot sink the others
        Value body = Value::MakeObject();
        body.Set("client_id", clientId);
        body.Set("epoch", epoch);
        Value part = Value::MakeArray();
        for (auto& item : alone) part.Push(item);
        body.Set("entities", part);
        bodies.push_back(body);
    }
    observed_.clear();
    observedOrder_.clear();
    removed_.clear();
    scene_.reset();
    return bodies;
}

std::vector<std::string> Outbox::PendingTelemetry() const {
    std::vector<std::string> out;
    for (const auto& r : newest_)
        if (sent_.count(r)) out.push_back(r);
    return out;
}

bool Outbox::Answer(const std::string& ref, int status, const Value& body) {
    auto found = sent_.find(ref);
    if (found == sent_.end()) return status != 200;
    Sent s = found->second;
    sent_.erase(found);
    if (s.Telemetry && status == 200) Taken(s.Body);
    if (!s.Telemetry || status == 200) return status != 200;
    const Array& items = s.Body["entities"].Items();
    auto part = [&](size_t from, size_t to) {
        Value list = Value::MakeArray();
        for (size_t i = from; i < to; i++) list.Push(items[i]);
        return list;
    };
    if (status == 413 && items.size() > 1) {
        // rich observations: fewer entities a request, from now on too, and this one again in two
        size_t half = items.size() / 2;
        batch_ = std::max<size_t>(1, std::min(batch_, half));
        Value front = s.Body.ShallowCopy();
        front.Set("entities", part(0, half));
        Value back = s.Body.ShallowCopy();  // scene and removals went with the first
        back.Remove("scene");
        back.Remove("removed");
        back.Set("entities", part(half, items.size()));
        again_.push_back(front);
        again_.push_back(back);
        return false;
    }
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto& i : items) pairs.emplace_back(i["id"].AsString(), i["type"].AsString());
    auto bad = host_.HostRefusals().Entities(status, body, pairs);
    if (!bad) return true;
    Value kept = s.Body.ShallowCopy();
    Value left = Value::MakeArray();
    for (const auto& i : items) {
        bool refused = false;
        for (const auto& b : *bad) refused = refused || b.first == i["id"].AsString();
        if (!refused) left.Push(i);
    }
    kept.Set("entities", left);
    if (left.Size() > 0 || kept["removed"].Size() > 0 || kept.Has("scene")) again_.push_back(kept);
    return false;
}

void Outbox::Taken(const Value& body) {
    // an observed entity taken: it may go with the others again (one that decides: by /v1/decide)
    for (const auto& item : body["entities"].Items()) {
        const std::string& id = item["id"].AsString();
        if (!host_.Tracked(id)) host_.HostRefusals().Alone.erase(id);
    }
}

void Outbox::Push(Value body, std::vector<OutRequest>& output) {
    auto request = host_.Post("/v1/telemetry", body, {});
    if (!request) return;
    sent_[request->Ref] = Sent{true, body};
    newest_.push_back(request->Ref);
    output.push_back(std::move(*request));
}

}  // namespace npcmind
