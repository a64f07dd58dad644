"""Auxiliary learners: plain nn.Module heads (heads.py) and Lightning modules that train them."""
