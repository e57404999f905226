// The per-entity rules (no I/O): tracking, events, the epoch, population changes, cascade, and applying a
// decision to the entity it names; the scheduler keeps the requests and answers.
#pragma once

#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "NpcMindCore/Answer.h"
#include "NpcMindCore/Say.h"
#include "NpcMindCore/Types.h"

namespace npcmind {

/// The cascade's choice for an entity, or nullopt: the service decides.
using Chooser = std::function<std::optional<PolicyChoice>(const Entity&)>;

/// Entities by id in the order they were tracked (the order of a request's entities is part of the protocol:
/// a 422 names them by index).
class OrderedEntities {
public:
    size_t Count() const { return byId_.size(); }
    Entity* Find(const std::string& id) const;
    bool Contains(const std::string& id) const { return byId_.count(id) > 0; }
    Entity& Add(const std::string& id);
    bool Remove(const std::string& id);
    /// The entities in the order tracked (removed ones dropped at the first walk after).
    const std::vector<Entity*>& Values();

private:
    std::unordered_map<std::string, std::unique_ptr<Entity>> byId_;
    std::vector<Entity*> order_;
    std::vector<std::unique_ptr<Entity>> removed_;  // freed at the next walk: `order_` still points at them
    bool holes_ = false;
};

/// The entities of one game, on the scheduler's clock (ms).
class Roster {
public:
    /// A change of population re-asks everyone, at most this often.
    static constexpr double ReaskGapMs = 500;
    OrderedEntities Entities;
    int Epoch;
    Chooser Choose;
    double Threshold;

    Roster(int epoch, double windowMs, Chooser choose, double threshold, Stats& stats, SayOnce& say);
    /// Add an entity that decides, or update what it sees and may do now.
    void Track(const std::string& id, const std::string& type, const Value& observation,
               const std::vector<std::string>& legalActions, const TrackOptions& options, double now);
    /// Something happened to the entity: asked when the event window it opened or joined ends. False (said
    /// once) for an entity not tracked.
    bool Event(const std::string& id, const std::string& trigger, double now);
    /// The report item for the entity's current AI decision, or null: it has none, or the outcome is unknown.
    Value Report(const std::string& id, const std::string& outcome, const std::string& detail);
    /// The entity's live decision, or nullopt: run the game's native AI. Checked against `legalNow` when given,
    /// else the legal actions last tracked.
    std::optional<Choice> Action(const std::string& id, const std::vector<std::string>* legalNow, double now);
    /// A new epoch: what was decided for the old state no longer holds, and everyone is asked again.
    void SetEpoch(int value, double now);
    /// When the number of entities changed, everyone is due now (at most every 500 ms).
    void Population(double now);
    /// Cascade: whether the local policy is sure enough of `e` to decide it here.
    bool Local(Entity& e, double now, double ttl);
    /// One decision of an answer for the entity it names; `legal`: the legal actions sent with it.
    void Use(Entity& e, const Decision& d, const std::vector<std::string>& legal, double now);
    /// The entities of an answered or failed request may be asked again: at `due`, or else on their next
    /// refresh; those in `keep` on their refresh.
    void Release(const std::vector<std::string>& ids, std::optional<double> due,
                 const std::vector<std::pair<std::string, std::string>>* keep = nullptr);

private:
    double windowMs_;
    Stats& stats_;
    SayOnce& say_;
    double windowEnd_ = -std::numeric_limits<double>::infinity();
    size_t count_ = 0;
    double lastReask_ = -std::numeric_limits<double>::infinity();
    bool reaskPending_ = false;
    uint64_t places_ = 0;
};

}  // namespace npcmind
