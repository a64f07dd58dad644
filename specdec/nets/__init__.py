"""The networks drafters and policies load, and their shipped formats (save / load / check).

One subpackage per learned part: ``eagle3`` (the EAGLE-3 feature drafter, the published layout and
its interop), ``specblock`` (the block drafter, its slot geometry and shipped format),
``specdecpp`` (the SpecDec++ acceptance head) and ``hrad`` (SpecBranch's H-RAD classifier and its
input features). Plain ``torch.nn`` modules: no Lightning, no decoding loop. The drafters
(``specdec.drafters``) decode with them; the learners (``specdec.learners``) train and export them.
The small draft LM is a model of the pair and lives with the models
(``specdec.models.reduced_draft``).
"""
