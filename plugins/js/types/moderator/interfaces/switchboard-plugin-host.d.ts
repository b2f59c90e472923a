declare module 'switchboard:plugin/host@0.4.0' {
  /**
   * Logs under the process's `plugin` target, tagged with the tenant,
   * the hook and the component's digest. Long messages are cut.
   */
  export function log(level: Level, message: string): void;
  /**
   * A configuration value deployed with this version, if set.
   */
  export function config(key: string): string | undefined;
  /**
   * # Variants
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'debug' | 'info' | 'warn' | 'error';
}
