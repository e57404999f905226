// Stand-ins of the Unreal Engine types and macros the NpcMind module touches, and no more: the module is compiled
// against them here (UnrealBuildTool is not on these machines), so a change of its code that no longer fits
// these engine APIs fails the build. Declarations only: the objects are compiled, never linked or run. Signatures
// follow Unreal Engine 5's; TCHAR is char here (UTF-8), which the module never relies on (it converts through
// TCHAR_TO_UTF8 / UTF8_TO_TCHAR).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using int32 = int32_t;
using uint8 = uint8_t;
using TCHAR = char;
#define TEXT(x) x
#define TCHAR_TO_UTF8(x) static_cast<const char*>(x)
#define UTF8_TO_TCHAR(x) static_cast<const TCHAR*>(x)
#define NPCMIND_API

// UHT's markers: nothing here (the .generated.h stand-ins give each class its Super)
#define UCLASS(...)
#define UPROPERTY(...)
#define UFUNCTION(...)

class FString {
public:
    FString() = default;
    FString(const TCHAR* s) : text_(s) {}
    const TCHAR* operator*() const { return text_.c_str(); }
    FString ToLower() const;
    FString TrimStartAndEnd() const;
    bool Split(const TCHAR* by, FString* left, FString* right) const;
    bool StartsWith(const TCHAR* prefix) const;

private:
    std::string text_;
};

template <typename T>
class TArray {
public:
    TArray() = default;
    TArray(std::initializer_list<T> items) : items_(items) {}
    int32 Num() const { return static_cast<int32>(items_.size()); }
    const T* GetData() const { return items_.data(); }
    void Append(const T* items, int32 count) { items_.insert(items_.end(), items, items + count); }
    const T* begin() const { return items_.data(); }
    const T* end() const { return items_.data() + items_.size(); }

private:
    std::vector<T> items_;
};

template <typename K, typename V>
struct TPair {
    K Key;
    V Value;
};

template <typename K, typename V>
class TMap {
public:
    TMap() = default;
    TMap(std::initializer_list<TPair<K, V>> items) : items_(items) {}
    const TPair<K, V>* begin() const { return items_.data(); }
    const TPair<K, V>* end() const { return items_.data() + items_.size(); }

private:
    std::vector<TPair<K, V>> items_;
};

enum class ESPMode { NotThreadSafe, ThreadSafe };

template <typename T, ESPMode Mode = ESPMode::ThreadSafe>
class TSharedPtr {
public:
    T* operator->() const { return ptr_.get(); }
    bool IsValid() const { return ptr_ != nullptr; }

private:
    std::shared_ptr<T> ptr_;
};

template <typename T, ESPMode Mode = ESPMode::ThreadSafe>
class TSharedRef {
public:
    T* operator->() const { return ptr_.get(); }

private:
    std::shared_ptr<T> ptr_;
};

struct FVector {
    double X = 0, Y = 0, Z = 0;
};

struct TStatId {};
#define RETURN_QUICK_DECLARE_CYCLE_STAT(Name, Group) return TStatId()

namespace NpcMindStandIn {
struct LogCategory {};
template <typename... Args>
void Log(const LogCategory&, const TCHAR* format, Args... args);
}  // namespace NpcMindStandIn
#define DEFINE_LOG_CATEGORY_STATIC(Name, Verbosity, Compiled) static NpcMindStandIn::LogCategory Name
#define UE_LOG(Category, Verbosity, ...) NpcMindStandIn::Log(Category, __VA_ARGS__)

class UWorld;

class UObject {
public:
    virtual ~UObject() = default;
    virtual UWorld* GetWorld() const;
};

template <typename T>
const T* GetDefault();
template <typename T>
T* NewObject();

// A dynamic multicast delegate: Broadcast with its parameters' types
#define DECLARE_DYNAMIC_MULTICAST_DELEGATE_OneParam(Name, T1, N1) \
    struct Name {                                                 \
        void Broadcast(T1 N1) const;                              \
    };
#define DECLARE_DYNAMIC_MULTICAST_DELEGATE_TwoParams(Name, T1, N1, T2, N2) \
    struct Name {                                                          \
        void Broadcast(T1 N1, T2 N2) const;                                \
    };
