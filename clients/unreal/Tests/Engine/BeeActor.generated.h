// Stand-in of what UnrealHeaderTool generates for Examples/Actor/BeeActor.h: here only the class's Super.
#undef GENERATED_BODY
#define GENERATED_BODY() \
public:                  \
    using Super = AActor;
