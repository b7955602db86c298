"""canis demo: the pyglet viewer driven by a gamepad or the keyboard."""
