"""From request to events: prompts, the localizer, the program and text decoders, the drafter, the program writer."""
