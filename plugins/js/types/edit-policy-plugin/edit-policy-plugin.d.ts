/// <reference path="./interfaces/switchboard-plugin-edit-policy.d.ts" />
/// <reference path="./interfaces/switchboard-plugin-host.d.ts" />
declare module 'switchboard:plugin/edit-policy-plugin@0.4.0' {
  export type * as SwitchboardPluginHost040 from 'switchboard:plugin/host@0.4.0'; // import switchboard:plugin/host@0.4.0
  export * as editPolicy from 'switchboard:plugin/edit-policy@0.4.0'; // export switchboard:plugin/edit-policy@0.4.0
}
