// A distilled local policy (docs/policy.md): the game decides what the model would, without asking it. Evaluated
// exactly as the other SDKs do (the shared vectors in clients/conformance/policy/ check all four); loading checks
// the whole file with the same limits and messages, so Choose cannot fail or run long in the game.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "NpcMindCore/Types.h"

namespace npcmind {

/// A loaded policy file: Choose for each entity, or nullopt to ask the service.
class Policy {
public:
    static constexpr const char* Format = "npcmind-policy";
    static constexpr int FormatVersion = 1;
    /// distill writes ~60 kB a type: room for hundreds of types, not for a memory bomb (UTF-8 bytes).
    static constexpr size_t MaxBytes = 16 * 1024 * 1024;
    static constexpr int MaxNesting = 32;
    static constexpr int MaxDepth = 64;
    static constexpr long MaxNodes = 1000000;
    static constexpr size_t MaxTypes = 256;
    static constexpr size_t MaxTrees = 32;
    static constexpr size_t MaxActions = 256;
    static constexpr size_t MaxFeatures = 4096;

    std::string ManifestVersion;
    std::string ClientId;
    std::string CreatedAt;

    /// A policy from its UTF-8 text; nullptr with `error` (PolicyError's message) when it cannot be used. With a
    /// `manifestVersion`, a file distilled for another version is refused.
    static std::shared_ptr<Policy> Load(const std::string& text, std::string& error,
                                        const std::string& manifestVersion = "", size_t maxBytes = MaxBytes);
    /// A policy from a parsed object.
    static std::shared_ptr<Policy> Load(const Value& data, std::string& error, const std::string& manifestVersion = "");
    /// "" when this policy may be used for `manifestVersion`, else why not.
    std::string Check(const std::string& manifestVersion) const;
    /// The entity types this policy covers, sorted.
    std::vector<std::string> Covers() const;
    /// The most probable legal action and its probability among the legal ones; nullopt for a type this policy
    /// does not cover or when no legal action has any probability. Never fails: a value not of its feature's
    /// kind is that feature's `missing`.
    std::optional<PolicyChoice> Choose(const Value& type, const Value& observation, const Value& legalActions,
                                       const Value& world = Value(), const Value& scopeState = Value(),
                                       const Value& trigger = Value(), const Value& profile = Value()) const;
    /// Python's round() on a float: to the nearest integer, a tie to the even one.
    static double RoundHalfEven(double x);
    /// Where the JSON first nests deeper than MaxNesting (outside strings, in characters), or -1, in one pass.
    static long TooDeep(const std::string& text);

    struct Feature {
        std::string Source, Field, Encoding, Value;
        bool HasField = false, HasValue = false;
        std::optional<double> Quantum;
        double Missing = 0;
    };
    struct Tree {
        std::vector<int> Feature, Left, Right;
        std::vector<double> Threshold;
        std::vector<std::vector<double>> Leaf;
    };
    struct TypePolicy {
        std::vector<std::string> Actions;
        std::vector<Feature> Features;
        std::vector<Tree> Trees;
        std::unordered_map<std::string, int> Index;
    };

private:
    std::map<std::string, TypePolicy> types_;
};

}  // namespace npcmind
