// Package chat renders chat templates (Jinja, as transformers'
// apply_chat_template does) and parses model output incrementally into
// content, reasoning and tool calls.
package chat
