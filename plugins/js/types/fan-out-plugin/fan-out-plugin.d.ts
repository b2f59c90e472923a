/// <reference path="./interfaces/switchboard-plugin-fan-out.d.ts" />
/// <reference path="./interfaces/switchboard-plugin-host.d.ts" />
/// <reference path="./interfaces/switchboard-plugin-types.d.ts" />
declare module 'switchboard:plugin/fan-out-plugin@0.4.0' {
  export type * as SwitchboardPluginHost040 from 'switchboard:plugin/host@0.4.0'; // import switchboard:plugin/host@0.4.0
  export type * as SwitchboardPluginTypes040 from 'switchboard:plugin/types@0.4.0'; // import switchboard:plugin/types@0.4.0
  export * as fanOut from 'switchboard:plugin/fan-out@0.4.0'; // export switchboard:plugin/fan-out@0.4.0
}
