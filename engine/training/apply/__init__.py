"""Training the apply selector: synthetic apply cases, their oracle programs, their recorded windows."""
