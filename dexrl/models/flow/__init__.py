"""What the flow-matching policies (π0, DM0, and any third one) share: the denoising maths
(:mod:`.sampling`), the Mixture-of-Transformers layer loop (:mod:`.mot`), the config fields
(:mod:`.config`), the network base with its batch inputs (:mod:`.network`), the vision projector
(:mod:`.projector`), the weight loader (:mod:`.loader`) and the inference policy (:mod:`.policy`).
"""
