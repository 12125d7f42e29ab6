"""The Chess-World-Model track (Walker & Lyons, 2026): predict the full 75-label chess state after
every move from the stream of move tokens; its task, metrics, evaluation, tracker (its demo:
`launch/demo_world_model.py`)."""
