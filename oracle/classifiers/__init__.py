"""Classifiers trained on oracle samples: build (timm), train, predict, evaluate.

Modules: `build` (the model and its input pipeline), `train`, `predict`, `evaluate`,
`targets` (training labels), `checkpoints` (stored models), `data` (training and evaluation
sets read from a world's samples and splits), `stream` (training images read batch by batch
from the sample file, so a job's memory does not grow with N; bit-identical training).

The input pipeline is part of the classifier
--------------------------------------------
The oracle's posterior ``p(y|x)`` is computed on ``x`` exactly as stored in the sample
shards (float32 in [-1, 1], DESIGN rule 2). Any preprocessing a classifier wants is therefore
a layer of the classifier, never a transform of the data: ``build_classifier`` returns an
``ImageClassifier`` whose first module, ``InputPipeline``, does (paper, appendix F.2)

1. ``u = (x + 1) / 2``                      [-1, 1] -> [0, 1]
2. ``v = (u - mean_c) / std_c``              per channel: ImageNet mean/std for 3 channels;
                                            0.5/0.5 for any other channel count (for one
                                            channel that makes steps 1-2 the identity)
3. bilinear resize to ``input_size``        only when asked, for architectures whose stem or
                                            patch size needs larger inputs than the data
                                            (e.g. 8x8 digits into a ViT with 16x16 patches).

Steps 2 and 3 commute (bilinear weights sum to one), so their order is immaterial.

Training (``train_classifier``)
-------------------------------
AdamW with a cosine schedule stepped per optimizer step from ``lr`` to 0 over all epochs
(paper, Table 6: AdamW, weight decay 0.01, lr 1e-4, cosine over 40 epochs, batch 32).
Hard labels (int64 ``[n]``) use cross-entropy; soft labels (probabilities ``[n, K]``, the
oracle posterior) use the cross-entropy against the distribution, ``-sum_k t_k log q_k``.
On CUDA the forward pass runs under bf16 autocast; the loss is computed in float32.
A run is a function of (data, hyperparameters, seed, initial weights): the validation split,
the shuffling and every random draw inside the model (dropout, drop-path) come from streams
derived from ``seed``; the caller's global RNG is left untouched. With ``checkpoint_path``
the state (weights, optimizer, schedule, RNG streams, history) is saved atomically after
every epoch and a rerun resumes from it, giving the same weights as an uninterrupted run.

Evaluation (``evaluate_predictions``)
-------------------------------------
Exact quantities come from ``oracle.decomposition`` (total = aleatoric + epistemic, nats) and
``oracle.measures.calibration``. Two label notions are reported separately:

* the world's ``label`` y ~ p_T(y|x) (DESIGN rule 8; the source class when T = 1): accuracy
  (``acc``), NLL, ECE and Brier "against labels", as the paper reports them. Because the labels
  are drawn from p_T, ``nll`` is an unbiased estimate of ``total``, ``brier`` of
  ``brier_expected``, and the Bayes accuracy bounds ``acc`` in expectation.
* the oracle posterior ``p(y|x)``: accuracy against its argmax, the exact calibration error
  (``ece_posterior``: ECE with the 0/1 correctness replaced by ``p(yhat|x)``) and the Brier
  score in expectation over ``y ~ p(y|x)``.
"""
