"""Training the span selector: synthetic cases, recording through the decoder, LoRA training, the card."""
