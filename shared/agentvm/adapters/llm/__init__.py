"""Model providers behind the ``ModelClient`` port: Anthropic, OpenAI(-compatible), Bedrock, echo,
scripted, and the router that picks one per image."""
