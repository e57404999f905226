// Stand-in (see CoreMinimal.h).
#pragma once
struct FPlatformTime {
    static double Seconds();
};
