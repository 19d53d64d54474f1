"""The zoo's vision models: CNN classifiers and vision transformers, segmenters, detectors and
a video classifier (export_zoo.py's docstring lists them and every deviation from torchvision)."""

import numpy as np
import torch
import torchvision
from torch import nn
from torchvision.models import detection as tvd
from torchvision.models import segmentation as tvs
from torchvision.models import video as tvv

from zoo_common import (IMAGENET, batch_1_and_8, calibrate_bn, check_logits, classifier_batches,
                        last_linear, normalize, redraw_zero_weights, require, seed_of,
                        set_layer_scales, smooth_images, spec, to_numpy, video_clips)

# ---- CNN classifiers and vision transformers -----------------------------------------------


def image_classifier(name, ctor, size=224, head=True, family="cnn", atol=1e-4, rtol=1e-3):
    def make(rng, n):
        return normalize(smooth_images(rng, n, size, size), IMAGENET)

    def build():
        model = ctor()
        redraw_zero_weights(model)
        set_layer_scales(model)
        calibrate_bn(model, classifier_batches(name, make))
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        cand = make(rng, 12)
        return batch_1_and_8(name, model, cand, last_linear(model) if head else None)

    def verify(model, inputs, outs):
        check_logits(name, outs[0], len(inputs[0]))

    spec(name, family, build, inputs, ["input"], ["logits"],
         {"input": {0: "batch"}, "logits": {0: "batch"}}, check="argmax:0", atol=atol, rtol=rtol,
         verify=verify)


M = torchvision.models
image_classifier("resnet18", lambda: M.resnet18(weights=None))
image_classifier("resnet50", lambda: M.resnet50(weights=None), atol=3e-4)
# Wide ResNet: the Wide ResNet-50-2 blocks (bottleneck width 128 per group) with one block per
# stage instead of (3, 4, 6, 3): wide_resnet50_2 is 276 MB.
image_classifier("wide_resnet14_2", lambda: torchvision.models.resnet.ResNet(
    torchvision.models.resnet.Bottleneck, [1, 1, 1, 1], width_per_group=128))
image_classifier("mobilenet_v2", lambda: M.mobilenet_v2(weights=None), atol=1e-3)
image_classifier("mobilenet_v3_small", lambda: M.mobilenet_v3_small(weights=None))
image_classifier("mobilenet_v3_large", lambda: M.mobilenet_v3_large(weights=None), atol=2e-4)
image_classifier("efficientnet_b0", lambda: M.efficientnet_b0(weights=None), atol=2e-4)
image_classifier("densenet121", lambda: M.densenet121(weights=None))
image_classifier("regnet_y_400mf", lambda: M.regnet_y_400mf(weights=None), atol=3e-4)
image_classifier("convnext_tiny", lambda: M.convnext_tiny(weights=None))
image_classifier("shufflenet_v2_x1_0", lambda: M.shufflenet_v2_x1_0(weights=None), atol=1e-3)
# SqueezeNet's classifier is a 1x1 convolution followed by ReLU and average pooling (no Linear
# head to centre).
image_classifier("squeezenet1_1", lambda: M.squeezenet1_1(weights=None), head=False)
image_classifier("mnasnet1_0", lambda: M.mnasnet1_0(weights=None), atol=1e-3)
image_classifier("googlenet", lambda: M.googlenet(weights=None, aux_logits=False, init_weights=True),
                 atol=2e-4)
image_classifier("inception_v3", lambda: M.inception_v3(weights=None, aux_logits=False, init_weights=True),
                 size=299, atol=5e-4)
# ViT: the ViT-B/32 layout (224x224, 32x32 patches, class token, pre-norm blocks) at depth 6,
# width 384, 6 heads, MLP 1536 instead of 12 / 768 / 12 / 3072: ViT-B/32 is 350 MB.
image_classifier("vit_b_32_small", lambda: torchvision.models.vision_transformer.VisionTransformer(
    image_size=224, patch_size=32, num_layers=6, num_heads=6, hidden_dim=384, mlp_dim=1536),
    family="vit")
image_classifier("swin_t", lambda: M.swin_t(weights=None), family="vit")


# ---- segmentation -----------------------------------------------------------------------------


class OutOnly(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def segmenter(name, ctor, sizes, atol=1e-4, rtol=1e-3):
    def make(rng, n, size):
        return normalize(smooth_images(rng, n, size, size), IMAGENET)

    def build():
        model = OutOnly(ctor())
        redraw_zero_weights(model)
        rng = np.random.default_rng(seed_of(name, "calibration"))
        calibrate_bn(model, [(torch.from_numpy(make(rng, 8, sizes[8])),) for _ in range(2)])
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        return {1: [make(rng, 1, sizes[1])], 8: [make(rng, 8, sizes[8])]}

    def verify(model, inputs, outs):
        out = outs[0]
        pix = np.moveaxis(out, 1, -1)
        check_logits(name, pix, 1)
        classes = len(np.unique(pix.argmax(-1)))
        require(classes >= 2, f"{name}: every pixel has the same class")

    spec(name, "segmentation", build, inputs, ["input"], ["out"],
         {"input": {0: "batch", 2: "height", 3: "width"}, "out": {0: "batch", 2: "height", 3: "width"}},
         atol=atol, rtol=rtol, verify=verify)


# The batch-8 cases use smaller images than the batch-1 cases (the height / width axes are
# dynamic too): 8 x 21 x 224 x 224 logits would be 34 MB per output file.
segmenter("fcn_resnet50", lambda: tvs.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False),
          {1: 224, 8: 112}, atol=1e-3)
segmenter("deeplabv3_mobilenet_v3_large",
          lambda: tvs.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False),
          {1: 256, 8: 128}, atol=3e-4)
segmenter("lraspp_mobilenet_v3_large",
          lambda: tvs.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), {1: 256, 8: 128},
          atol=2e-4)


# ---- detection --------------------------------------------------------------------------------


class Detector(nn.Module):
    """One image [3, H, W] in [0, 1] -> boxes [K, 4], scores [K], labels [K] (+ masks [K, 1, H, W])."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, image):
        out = self.model([image])[0]
        res = [out["boxes"], out["scores"], out["labels"]]
        if "masks" in out:
            res.append(out["masks"])
        return tuple(res)


def thresholds(model):
    """The (object, attribute) pairs of the score / NMS thresholds of a torchvision detector."""
    m = model.model
    if hasattr(m, "roi_heads"):
        return {"score": (m.roi_heads, "score_thresh"), "nms": (m.roi_heads, "nms_thresh"),
                "rpn_score": (m.rpn, "score_thresh"), "rpn_nms": (m.rpn, "nms_thresh")}
    return {"score": (m, "score_thresh"), "nms": (m, "nms_thresh")}


def detection_cap(model):
    m = model.model
    return m.roi_heads.detections_per_img if hasattr(m, "roi_heads") else m.detections_per_img


def choose_score_threshold(name, model, image, lo, want=(8, 40)):
    """Runs with the threshold `lo`, then puts the threshold in the widest gap between consecutive
    scores that leaves between want[0] and want[1] detections."""
    obj, attr = thresholds(model)["score"]
    cap = detection_cap(model)
    for _ in range(4):
        setattr(obj, attr, lo)
        with torch.no_grad():
            scores = model(image)[1].numpy()
        if len(scores) < cap:
            break
        lo = float(np.sort(scores)[::-1][cap // 2])  # the cap cut some: start higher
    require(len(scores) < cap, f"{name}: {len(scores)} detections reach the cap {cap}")
    require(len(scores) > want[0], f"{name}: only {len(scores)} detections at threshold {lo}")
    s = np.sort(scores)[::-1]
    hi = min(want[1], len(s) - 1)
    k = max(range(want[0], hi + 1), key=lambda k: s[k - 1] - s[k])
    thr = float((s[k - 1] + s[k]) / 2)
    require(s[k - 1] - s[k] > 4e-4, f"{name}: no score gap above 4e-4 (best {s[k - 1] - s[k]:.3g})")
    setattr(obj, attr, thr)
    return thr


def check_detections(name, model, image, outs):
    boxes, scores, labels = outs[:3]
    n = len(scores)
    require(n > 0, f"{name}: no detections")
    require(scores.std() > 1e-3, f"{name}: all scores equal ({scores[0]:.4f})")
    require(len(np.unique(labels)) >= 2, f"{name}: a single label")
    require(len(np.unique(scores)) == n, f"{name}: tied scores")
    # Float noise must not change the result: the same detections with every threshold moved
    # by +-1e-4.
    for key, (obj, attr) in thresholds(model).items():
        base = getattr(obj, attr)
        for delta in (-1e-4, 1e-4):
            setattr(obj, attr, base + delta)
            with torch.no_grad():
                o = to_numpy(model(image))
            setattr(obj, attr, base)
            require(len(o[1]) == n and np.allclose(o[0], boxes, atol=1e-3),
                    f"{name}: {key} threshold {base}{delta:+g} changes the detections "
                    f"({n} -> {len(o[1])})")


def detector(name, ctor, opsets, tune, size=(256, 320), first_thresh=0.0, atol=1e-4):
    def make(rng, n):
        return smooth_images(rng, n, *size)

    def build():
        model = Detector(ctor())
        redraw_zero_weights(model)
        rng = np.random.default_rng(seed_of(name, "calibration"))
        imgs = torch.from_numpy(make(rng, 8))
        calibrate_bn(model.model, [(list(imgs[:4]),), (list(imgs[4:]),)])
        with torch.no_grad():
            tune(model.model)
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        image = make(rng, 1)[0]
        choose_score_threshold(name, model, torch.from_numpy(image), first_thresh)
        return {1: [image]}

    def verify(model, inputs, outs):
        check_detections(name, model, torch.from_numpy(inputs[0]), outs)

    outputs = ["boxes", "scores", "labels"] + (["masks"] if "mask" in name else [])
    axes = {"image": {1: "height", 2: "width"}}
    for o in outputs:
        axes[o] = {0: "detections"}
    spec(name, "detection", build, inputs, ["image"], outputs, axes, opsets=opsets,
         check="detection:0", atol=atol, verify=verify)


def tune_ssd(m):
    # The classification convolutions start at N(0, 0.03): every softmax score sat at 1/91.
    for block in m.head.classification_head.module_list:
        block[-1].weight.mul_(3)


def tune_retinanet(m):
    m.head.classification_head.cls_logits.weight.mul_(30)


def tune_rcnn(m):
    # RPN objectness starts at N(0, 0.01): every proposal had the same score, so which ones
    # survive the top-n cut was decided by float noise.
    m.rpn.head.cls_logits.weight.mul_(50)
    m.rpn.head.bbox_pred.weight.mul_(10)
    m.roi_heads.box_predictor.cls_score.weight.mul_(5)


def maskrcnn_mobilenet_v3_large_320_fpn():
    # The Mask R-CNN heads on fasterrcnn_mobilenet_v3_large_320_fpn's backbone and settings.
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import _mobilenet_extractor
    backbone = _mobilenet_extractor(M.mobilenet_v3_large(weights=None, norm_layer=nn.BatchNorm2d), True, 6)
    anchors = AnchorGenerator(((32, 64, 128, 256, 512),) * 3, ((0.5, 1.0, 2.0),) * 3)
    return tvd.MaskRCNN(backbone, 91, rpn_anchor_generator=anchors, min_size=320, max_size=640,
                        rpn_pre_nms_top_n_test=150, rpn_post_nms_top_n_test=150, rpn_score_thresh=0.05)


detector("ssdlite320_mobilenet_v3_large",
         lambda: tvd.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None), (13, 17),
         tune_ssd, first_thresh=0.2)
detector("retinanet_resnet50_fpn",
         lambda: tvd.retinanet_resnet50_fpn(weights=None, weights_backbone=None, min_size=320, max_size=320),
         (13, 17), tune_retinanet, first_thresh=0.1)
# torchvision 0.14 exports RoiAlign wrongly at opset >= 16, so the R-CNN family is opset 15 only.
detector("fasterrcnn_mobilenet_v3_large_320_fpn",
         lambda: tvd.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None), (15,),
         tune_rcnn, first_thresh=0.2)
detector("maskrcnn_mobilenet_v3_large_320_fpn", maskrcnn_mobilenet_v3_large_320_fpn, (15,), tune_rcnn,
         first_thresh=0.08, atol=3e-3)


# ---- video --------------------------------------------------------------------------------------


def video_classifier(name, ctor, frames=8, size=64):
    def make(rng, n):
        return video_clips(rng, n, frames, size, size)

    def build():
        model = ctor()
        redraw_zero_weights(model)
        calibrate_bn(model, classifier_batches(name, make))
        return model

    def inputs(model):
        rng = np.random.default_rng(seed_of(name, "inputs"))
        cand = make(rng, 12)
        return batch_1_and_8(name, model, cand, last_linear(model))

    def verify(model, inputs, outs):
        check_logits(name, outs[0], len(inputs[0]))

    spec(name, "video", build, inputs, ["input"], ["logits"],
         {"input": {0: "batch"}, "logits": {0: "batch"}}, check="argmax:0", verify=verify)


video_classifier("r3d_18", lambda: tvv.r3d_18(weights=None))
