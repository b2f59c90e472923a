declare module 'switchboard:plugin/types@0.2.0' {
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
   * Message content a plugin may see. End-to-end encrypted content is
   * never passed to a plugin.
   */
  export type Content = ContentText | ContentImage | ContentFile | ContentVoice;
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
}
