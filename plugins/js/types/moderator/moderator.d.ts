/// <reference path="./interfaces/switchboard-plugin-host.d.ts" />
/// <reference path="./interfaces/switchboard-plugin-moderation.d.ts" />
/// <reference path="./interfaces/switchboard-plugin-types.d.ts" />
declare module 'switchboard:plugin/moderator@0.4.0' {
  export type * as SwitchboardPluginHost040 from 'switchboard:plugin/host@0.4.0'; // import switchboard:plugin/host@0.4.0
  export type * as SwitchboardPluginTypes040 from 'switchboard:plugin/types@0.4.0'; // import switchboard:plugin/types@0.4.0
  export * as moderation from 'switchboard:plugin/moderation@0.4.0'; // export switchboard:plugin/moderation@0.4.0
}
