// Stand-in (see CoreMinimal.h): UDeveloperSettings, a UObject shown in Project Settings.
#pragma once
#include "CoreMinimal.h"
class UDeveloperSettings : public UObject {};
