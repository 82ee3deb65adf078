"""Models shipped with torchtfx, each a plain ``nn.Module`` built by a factory ``f(spec, **hparams)``.

Selectable by name (``--model mlp``); a user's own factory is named by ``module:function`` or
``path/to/file.py:function`` instead.
"""
