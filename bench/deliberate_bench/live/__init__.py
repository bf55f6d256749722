"""Live side-by-side runs on the real stack (with against without), the soak, and lm-eval through the gateway."""
