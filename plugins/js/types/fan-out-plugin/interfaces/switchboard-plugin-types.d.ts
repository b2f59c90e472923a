declare module 'switchboard:plugin/types@0.4.0' {
  /**
   * # Variants
   * 
   * ## `"direct"`
   * 
   * ## `"group"`
   * 
   * ## `"channel"`
   */
  export type ConversationKind = 'direct' | 'group' | 'channel';
  /**
   * A reference to media uploaded through the media API: metadata only,
   * never the bytes.
   */
  export interface Media {
    blobRef: string,
    mime: string,
    size: bigint,
    caption?: string,
  }
  /**
   * An app's own message kind (v1.3): the server never reads it.
   */
  export interface CustomContent {
    /**
     * The app's name for it: 1 to 64 of `A-Z a-z 0-9 . _ - : /`.
     */
    customType: string,
    /**
     * The app's fields: a JSON object, as compact JSON text.
     */
    data: string,
    /**
     * What clients that do not know the type show; what search and
     * pushes read.
     */
    fallbackText?: string,
  }
  /**
   * Message content a plugin may see. End-to-end encrypted content is
   * never passed to a plugin.
   */
  export type Content = ContentText | ContentImage | ContentFile | ContentVoice | ContentCustom;
  export interface ContentText {
    tag: 'text',
    val: string,
  }
  export interface ContentImage {
    tag: 'image',
    val: Media,
  }
  export interface ContentFile {
    tag: 'file',
    val: Media,
  }
  export interface ContentVoice {
    tag: 'voice',
    val: Media,
  }
  export interface ContentCustom {
    tag: 'custom',
    val: CustomContent,
  }
}
