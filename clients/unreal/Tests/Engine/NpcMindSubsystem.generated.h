// Stand-in of what UnrealHeaderTool generates for NpcMindSubsystem.h: here only the class's Super.
#undef GENERATED_BODY
#define GENERATED_BODY() \
public:                  \
    using Super = UGameInstanceSubsystem;
