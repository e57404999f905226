// Stand-in (see CoreMinimal.h): the base of an async Blueprint node.
#pragma once
#include "CoreMinimal.h"
class UBlueprintAsyncActionBase : public UObject {
public:
    virtual void Activate();
    void RegisterWithGameInstance(const UObject* WorldContextObject);
    void SetReadyToDestroy();
};
