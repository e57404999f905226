// Stand-in (see CoreMinimal.h).
#pragma once
#include "CoreMinimal.h"
class UGameInstance : public UObject {
public:
    template <typename T>
    T* GetSubsystem() const;
};
